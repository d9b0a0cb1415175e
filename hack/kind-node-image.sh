#!/usr/bin/env bash
# Assembles a kind node image for Kubernetes $KUBE_VERSION offline, without any registry and without
# `kind build node-image` (which pulls its base): a Debian bookworm root filesystem made by
# debootstrap (systemd, containerd, runc, iptables, the CNI plugins), the node's binaries that
# hack/tools.sh builds from the Go module proxy (kubeadm, kubelet, kubectl), the files kind reads
# (/kind/version, /kind/manifests/default-cni.yaml and default-storage.yaml), our entrypoint and
# units (hack/kind/node), and every image kubeadm and the manifests name, saved in
# /kind/images/images.tar and imported into containerd at boot:
#
#   registry.k8s.io/kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy:$KUBE_VERSION
#   registry.k8s.io/etcd:$ETCD_TAG, coredns/coredns:$COREDNS_VERSION, pause:$PAUSE_TAG
#   conductor-tf/local-path-provisioner:node, conductor-tf/local-path-helper:node (the node's root)
#
# Each control-plane image is one static binary on an empty root; kube-proxy's is the node's root
# filesystem (it runs iptables). The pod network is a static ptp configuration (one node).
#
#   hack/kind-node-image.sh      prints the image name on stdout
#
# KIND_NODE_IMAGE          image to produce (default conductor-tf/kind-node:$KUBE_VERSION)
# KIND_NODE_IMAGE_REBUILD=1  rebuild even if the image was built by the current recipe
# DEBIAN_MIRROR            as in hack/base-image.sh
#
# Cached and idempotent like hack/base-image.sh: a recipe stamp (label) on the image. Needs root
# (debootstrap, chroot) and Docker.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SUITE=bookworm
KUBE_VERSION=${KUBE_VERSION:-v1.37.1}
# The tags kubeadm v1.37 names (cmd/kubeadm/app/constants: DefaultEtcdVersion, PauseVersion,
# CoreDNSVersion); the etcd binary is the one Kubernetes itself requires (hack/tools.sh).
ETCD_TAG=3.7.0-0
PAUSE_TAG=3.10.2
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.6}
INCLUDE=systemd,systemd-sysv,dbus,containerd,runc,iptables,containernetworking-plugins,kmod,procps,util-linux,mount,ca-certificates,conntrack,socat,ethtool,ebtables,bash
IMAGE=${KIND_NODE_IMAGE:-conductor-tf/kind-node:$KUBE_VERSION}
CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
DIR=$CACHE/kind-node
ROOTFS=$DIR/rootfs
ARCH=$(dpkg --print-architecture 2>/dev/null || uname -m)
LABEL=org.conductor-tf.kind-node-recipe

log() { printf '[kind-node-image] %s\n' "$*" >&2; }
# shellcheck source=hack/lib/debian.sh
source "$ROOT/hack/lib/debian.sh"
# shellcheck source=hack/lib/images.sh
source "$ROOT/hack/lib/images.sh"

set -a; eval "$("$ROOT/hack/tools.sh" env)"; set +a
"$ROOT/hack/tools.sh" kind >&2

# The recipe: this script, the node's files, the pause source and the binaries' own stamps.
RECIPE_ID=$( { cat "$0" "$ROOT/hack/lib/debian.sh" "$ROOT/hack/lib/images.sh" "$ROOT"/hack/kind/node/* "$ROOT/hack/kind/pause/main.go";
  cat "$CONDUCTOR_TF_K8S_BIN/.stamp" "$CONDUCTOR_TF_NODE_BIN/.stamp" "$CONDUCTOR_TF_WORKLOAD_BIN/.local-path-provisioner.stamp"; echo "$INCLUDE $ARCH $KUBE_VERSION"; } | sha256sum | cut -c1-16)

image_recipe() { docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true; }

cleanup() {
  if [[ -d $ROOTFS/proc ]] && mountpoint -q "$ROOTFS/proc"; then umount "$ROOTFS/proc" || true; fi
  rm -rf "$DIR/images"
}

in_root() { chroot "$ROOTFS" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"; }

build_rootfs() {
  [[ $(id -u) == 0 ]] || { log "building the root filesystem needs root (debootstrap, chroot)"; exit 1; }
  ensure_debootstrap
  local mirror; mirror=${DEBIAN_MIRROR:-$(apt_uri "$SUITE" | head -1)}; mirror=${mirror:-http://deb.debian.org/debian}
  cleanup; rm -rf "$ROOTFS"; mkdir -p "$DIR" "$ROOTFS"
  # The Debian part is cached apart from the rest, which changes more often.
  local base=$DIR/debootstrap-$SUITE-$ARCH.tar.gz recipe="debootstrap minbase $SUITE $ARCH include=$INCLUDE"
  if fresh "$base.stamp" "$recipe"; then
    log "reusing $base"
    tar -C "$ROOTFS" --numeric-owner -xzf "$base"
  else
    log "debootstrap --variant=minbase $SUITE from $mirror (+ $INCLUDE)"
    debootstrap --variant=minbase --arch="$ARCH" --components=main --include="$INCLUDE" \
      "$SUITE" "$ROOTFS" "$mirror" >"$DIR/debootstrap.log" 2>&1 \
      || { tail -20 "$DIR/debootstrap.log" >&2; log "debootstrap failed; full log in $DIR/debootstrap.log"; exit 1; }
    tar -C "$ROOTFS" --numeric-owner -c . | gzip -1 >"$base.tmp"
    mv "$base.tmp" "$base"; echo "$recipe" >"$base.stamp"
  fi

  log "installing the node's binaries, units and kind's files"
  local node=$ROOT/hack/kind/node
  install -m 0755 "$CONDUCTOR_TF_NODE_BIN/kubelet" "$CONDUCTOR_TF_NODE_BIN/kubeadm" "$CONDUCTOR_TF_K8S_BIN/kubectl" "$ROOTFS/usr/bin/"
  install -m 0755 "$node/entrypoint" "$ROOTFS/usr/local/bin/entrypoint"
  install -D -m 0644 "$node/kubelet.service" "$ROOTFS/etc/systemd/system/kubelet.service"
  install -D -m 0644 "$node/10-kubeadm.conf" "$ROOTFS/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
  install -D -m 0644 "$node/kubelet.slice" "$ROOTFS/etc/systemd/system/kubelet.slice"
  install -D -m 0644 "$node/conductor-images.service" "$ROOTFS/etc/systemd/system/conductor-images.service"
  install -D -m 0644 "$node/containerd-oom.conf" "$ROOTFS/etc/systemd/system/containerd.service.d/10-oom.conf"
  install -D -m 0644 "$node/containerd-config.toml" "$ROOTFS/etc/containerd/config.toml"
  install -D -m 0644 "$node/10-conductor-ptp.conflist" "$ROOTFS/etc/cni/net.d/10-conductor-ptp.conflist"
  install -D -m 0644 "$node/crictl.yaml" "$ROOTFS/etc/crictl.yaml"
  install -D -m 0644 "$node/default-cni.yaml" "$ROOTFS/kind/manifests/default-cni.yaml"
  install -D -m 0644 "$node/default-storage.yaml" "$ROOTFS/kind/manifests/default-storage.yaml"
  printf 'KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service --resolv-conf=/kind/resolv.conf\n' >"$ROOTFS/etc/default/kubelet"
  printf '%s' "$KUBE_VERSION" >"$ROOTFS/kind/version"
  mkdir -p "$ROOTFS/etc/kubernetes/manifests" "$ROOTFS/var/lib/kubelet" "$ROOTFS/opt/cni"
  ln -sfn /usr/lib/cni "$ROOTFS/opt/cni/bin"

  # systemd in a container: no consoles to log in on, no kernel modules or binfmt to set up, and
  # journald must not read /dev/kmsg.
  in_root systemctl enable kubelet.service containerd.service conductor-images.service >/dev/null 2>&1
  in_root systemctl mask systemd-binfmt.service getty@tty1.service console-getty.service serial-getty@.service \
    systemd-modules-load.service sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
    systemd-remount-fs.service systemd-firstboot.service >/dev/null 2>&1
  printf '[Journal]\nReadKMsg=no\n' | install -D -m 0644 /dev/stdin "$ROOTFS/etc/systemd/journald.conf.d/10-kind.conf"
  in_root update-alternatives --set iptables /usr/sbin/iptables-legacy >/dev/null
  in_root update-alternatives --set ip6tables /usr/sbin/ip6tables-legacy >/dev/null
  trim_rootfs "$ROOTFS"
}

# build_images: every image kubeadm and the node's manifests name, saved into the root filesystem.
build_images() {
  log "building the control plane's images (one static binary each) and kube-proxy's"
  mkdir -p "$DIR/images"
  local r=registry.k8s.io
  scratch_image "$r/kube-apiserver:$KUBE_VERSION" "$CONDUCTOR_TF_K8S_BIN/kube-apiserver" /usr/local/bin/kube-apiserver
  scratch_image "$r/kube-controller-manager:$KUBE_VERSION" "$CONDUCTOR_TF_K8S_BIN/kube-controller-manager" /usr/local/bin/kube-controller-manager
  scratch_image "$r/kube-scheduler:$KUBE_VERSION" "$CONDUCTOR_TF_NODE_BIN/kube-scheduler" /usr/local/bin/kube-scheduler
  scratch_image "$r/etcd:$ETCD_TAG" "$CONDUCTOR_TF_K8S_BIN/etcd" /usr/local/bin/etcd
  scratch_image "$r/coredns/coredns:$COREDNS_VERSION" "$CONDUCTOR_TF_NODE_BIN/coredns" /coredns
  local pause=$DIR/images/pause
  (cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$pause" ./hack/kind/pause)
  scratch_image "$r/pause:$PAUSE_TAG" "$pause" /pause
  # kube-proxy runs iptables: its image is the node's root filesystem with the binary added.
  install -m 0755 "$CONDUCTOR_TF_NODE_BIN/kube-proxy" "$ROOTFS/usr/local/bin/kube-proxy"
  tar -C "$ROOTFS" --numeric-owner --xattrs --xattrs-include='*' -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$r/kube-proxy:$KUBE_VERSION" >/dev/null
  # Volumes (hack/kind/node/default-storage.yaml): the provisioner, and its helper pods on the node's root.
  scratch_image conductor-tf/local-path-provisioner:node "$CONDUCTOR_TF_WORKLOAD_BIN/local-path-provisioner" /usr/local/bin/local-path-provisioner
  docker tag "$r/kube-proxy:$KUBE_VERSION" conductor-tf/local-path-helper:node
  local images=("$r/kube-apiserver:$KUBE_VERSION" "$r/kube-controller-manager:$KUBE_VERSION" "$r/kube-scheduler:$KUBE_VERSION"
    "$r/kube-proxy:$KUBE_VERSION" "$r/etcd:$ETCD_TAG" "$r/coredns/coredns:$COREDNS_VERSION" "$r/pause:$PAUSE_TAG"
    conductor-tf/local-path-provisioner:node conductor-tf/local-path-helper:node)
  mkdir -p "$ROOTFS/kind/images"
  docker save -o "$ROOTFS/kind/images/images.tar" "${images[@]}"
  docker rmi "${images[@]}" >/dev/null
}

import_node() {
  log "importing the node image $IMAGE"
  local old; old=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
  # docker import refuses STOPSIGNAL; systemd stops on SIGRTMIN+3, which kind sends with docker stop -s.
  tar -C "$ROOTFS" --numeric-owner --xattrs --xattrs-include='*' -c . | docker import \
    --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
    --change 'ENV container=docker' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "LABEL $LABEL=$RECIPE_ID" \
    --message "hack/kind-node-image.sh: Kubernetes $KUBE_VERSION, recipe $RECIPE_ID" \
    - "$IMAGE" >/dev/null
  if [[ -n $old && $old != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]]; then
    docker rmi "$old" >/dev/null 2>&1 || true
  fi
}

if [[ ${KIND_NODE_IMAGE_REBUILD:-0} != 1 && "$(image_recipe "$IMAGE")" == "$RECIPE_ID" ]]; then
  log "$IMAGE is up to date"
else
  t0=$(date +%s)
  trap cleanup EXIT
  build_rootfs
  build_images
  import_node
  rm -rf "$ROOTFS"
  trap - EXIT
  log "built in $(( $(date +%s) - t0 ))s"
fi
size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
log "$IMAGE: $(numfmt --to=iec --suffix=B "$size") ($size bytes), recipe $RECIPE_ID"
echo "$IMAGE"
