#!/usr/bin/env bash
# Builds the controller's runtime base image offline, without any container registry: a minimal
# Debian bookworm root filesystem made by debootstrap from the Debian mirror apt already uses, with
# git, ca-certificates and openssh-client (what OpenTofu needs to fetch git:: module sources), the
# non-root user conductor (uid/gid 65532, home /work/home, as the Dockerfile expects), trimmed, then
# `docker import`ed into the local engine. The image runs as root, so that Dockerfile RUN steps work
# on it; the Dockerfile switches to USER 65532.
#
#   hack/base-image.sh      prints the image name on stdout (hack/docker-build.sh reads it)
#
# BASE_IMAGE      image to produce (default conductor-tf/base:bookworm)
# DEBIAN_MIRROR   Debian mirror (default: the URI apt uses for bookworm, else http://deb.debian.org/debian)
# DEBIAN_SECURITY_MIRROR  likewise for bookworm-security (default http://deb.debian.org/debian-security)
# BASE_IMAGE_UPDATES=0    skip applying bookworm-updates and bookworm-security on top of the release
# BASE_IMAGE_REBUILD=1    rebuild the root filesystem even if the cached one is fresh
#
# Cached and idempotent: the root filesystem tarball lives in $CACHE/base-image/ with a recipe stamp
# (as in hack/tools.sh). With the image present and built from the current recipe, nothing happens;
# with only the tarball present, it is re-imported. Needs root (debootstrap, chroot) and Docker.
set -euo pipefail

SUITE=bookworm
INCLUDE=git,ca-certificates,openssh-client
USER_NAME=conductor
USER_ID=65532
USER_HOME=/work/home
BASE_IMAGE=${BASE_IMAGE:-conductor-tf/base:$SUITE}
UPDATES=${BASE_IMAGE_UPDATES:-1}
CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
DIR=$CACHE/base-image
ROOTFS=$DIR/rootfs
TARBALL=$DIR/rootfs-$SUITE.tar.gz
STAMP=$TARBALL.stamp
ARCH=$(dpkg --print-architecture 2>/dev/null || uname -m)
# Bump the vN whenever the steps below change what ends up in the root filesystem.
RECIPE="base-image v2 $SUITE $ARCH minbase include=$INCLUDE updates=$UPDATES user=$USER_NAME:$USER_ID"
RECIPE_ID=$(printf '%s' "$RECIPE" | sha256sum | cut -c1-16)
LABEL=org.conductor-tf.base-recipe
# shellcheck source=hack/lib/debian.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/debian.sh"

log() { printf '[base-image] %s\n' "$*" >&2; }

image_recipe() { docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$BASE_IMAGE" 2>/dev/null || true; }

cleanup() {
  if [[ -d $ROOTFS/proc ]] && mountpoint -q "$ROOTFS/proc"; then umount "$ROOTFS/proc" || true; fi
}

# in_root CMD...: run a command inside the root filesystem.
in_root() { chroot "$ROOTFS" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"; }

build_rootfs() {
  [[ $(id -u) == 0 ]] || { log "building the root filesystem needs root (debootstrap, chroot): run it with sudo"; exit 1; }
  ensure_debootstrap
  local mirror security
  mirror=${DEBIAN_MIRROR:-$(apt_uri "$SUITE" | head -1)}; mirror=${mirror:-http://deb.debian.org/debian}
  security=${DEBIAN_SECURITY_MIRROR:-$(apt_uri "$SUITE-security" | head -1)}
  security=${security:-http://deb.debian.org/debian-security}
  log "debootstrap --variant=minbase $SUITE from $mirror (+ $INCLUDE)"
  cleanup; rm -rf "$ROOTFS"; mkdir -p "$DIR"
  trap cleanup EXIT
  debootstrap --variant=minbase --arch="$ARCH" --components=main --include="$INCLUDE" \
    "$SUITE" "$ROOTFS" "$mirror" >"$DIR/debootstrap.log" 2>&1 \
    || { tail -20 "$DIR/debootstrap.log" >&2; log "debootstrap failed; full log in $DIR/debootstrap.log"; exit 1; }

  # Packages installed later (here and in images built on this one) leave out docs, man pages, locales.
  cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/excludes" <<'CFG'
# hack/base-image.sh: keep images small; copyright files stay.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
  cat >"$ROOTFS/etc/apt/apt.conf.d/docker-clean" <<'CFG'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
CFG
  rm -f "$ROOTFS/etc/apt/sources.list"
  cat >"$ROOTFS/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $mirror
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC

  if [[ $UPDATES == 1 ]]; then
    log "applying $SUITE-updates and $SUITE-security"
    printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"; chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
    cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
    mount -t proc proc "$ROOTFS/proc"
    { in_root apt-get update -qq && in_root apt-get -y -o Dpkg::Options::=--force-confold upgrade; } \
      >>"$DIR/debootstrap.log" 2>&1 || { tail -20 "$DIR/debootstrap.log" >&2; log "upgrade failed"; exit 1; }
    umount "$ROOTFS/proc"
    rm -f "$ROOTFS/usr/sbin/policy-rc.d"
  fi

  log "adding user $USER_NAME ($USER_ID:$USER_ID)"
  # 65532 is above the login range (UID_MAX 60000); say so, or useradd warns. The home is under
  # /work, the controller's writable emptyDir (ssh reads ~/.ssh from the passwd entry, not $HOME).
  in_root groupadd --key GID_MAX="$USER_ID" --gid "$USER_ID" "$USER_NAME"
  in_root useradd --key UID_MAX="$USER_ID" --uid "$USER_ID" --gid "$USER_ID" --home-dir "$USER_HOME" \
    --no-create-home --shell /usr/sbin/nologin --comment conductor-tf "$USER_NAME"
  install -d -o "$USER_ID" -g "$USER_ID" "$ROOTFS/work" "$ROOTFS$USER_HOME"

  log "trimming"
  trim_rootfs "$ROOTFS"

  log "packing $TARBALL"
  tar -C "$ROOTFS" --numeric-owner --xattrs --xattrs-include='*' -c . | gzip -1 >"$TARBALL.tmp"
  mv "$TARBALL.tmp" "$TARBALL"
  echo "$RECIPE" >"$STAMP"
  rm -rf "$ROOTFS"
  trap - EXIT
}

import_image() {
  log "importing $TARBALL as $BASE_IMAGE"
  local old; old=$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || true)
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    --change "LABEL $LABEL=$RECIPE_ID" \
    --message "hack/base-image.sh: $RECIPE" \
    - "$BASE_IMAGE" <"$TARBALL" >/dev/null
  # The image this one replaced is left untagged; remove it unless something still uses it.
  if [[ -n $old && $old != "$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")" ]]; then
    docker rmi "$old" >/dev/null 2>&1 || true
  fi
}

if [[ ${BASE_IMAGE_REBUILD:-0} != 1 && "$(image_recipe)" == "$RECIPE_ID" ]]; then
  log "$BASE_IMAGE is up to date"
else
  if [[ ${BASE_IMAGE_REBUILD:-0} == 1 || ! -f $TARBALL ]] || ! fresh "$STAMP" "$RECIPE"; then
    build_rootfs
  fi
  import_image
fi
size=$(docker image inspect -f '{{.Size}}' "$BASE_IMAGE")
log "$BASE_IMAGE: $(numfmt --to=iec --suffix=B "$size") ($size bytes), recipe $RECIPE_ID"
echo "$BASE_IMAGE"
