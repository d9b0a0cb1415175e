# Shared by the scripts that build root filesystems from Debian's packages (hack/base-image.sh,
# hack/kind-node-image.sh): the mirror apt uses, debootstrap, and trimming. Source it; it defines
# functions only. log must be defined by the script that sources it.

# fresh STAMP RECIPE: the part was built by this very recipe, so it is reused.
fresh() { [[ -f $1 && "$(cat "$1")" == "$2" ]]; }

# apt_uri SUITE: the first URI apt on this machine uses for SUITE (deb822 .sources, then sources.list).
apt_uri() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    awk -v s="$1" 'BEGIN { RS = ""; FS = "\n" }
      { types = ""; uris = ""; suites = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^Types:/)  { types = $i }
          if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i); uris = $i }
          if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); suites = $i }
        }
        if (types ~ /[ \t]deb([ \t]|$)/ && (" " suites " ") ~ (" " s " ")) { split(uris, u, /[ \t]+/); print u[1]; exit }
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -r $f ]] || continue
    sed -e 's/\[[^]]*\]//' "$f" | awk -v s="$1" '$1 == "deb" && $3 == s { print $2; exit }'
  done
}

ensure_debootstrap() {
  command -v debootstrap >/dev/null && return 0
  log "installing debootstrap with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

# trim_rootfs DIR: drop what an image does not need (apt lists and caches, docs but copyright
# files, man pages, locales, logs) and empty the files Docker provides at run time.
trim_rootfs() {
  ( cd "$1"
    rm -rf var/lib/apt/lists/* var/cache/apt/* var/cache/debconf/*-old var/lib/dpkg/*-old \
      var/cache/ldconfig/aux-cache usr/share/man/* usr/share/info/* usr/share/groff/* \
      usr/share/lintian/* usr/share/linda/* tmp/* var/tmp/* dev/* proc/* sys/* run/*
    mkdir -p var/lib/apt/lists/partial var/cache/apt/archives/partial
    find usr/share/doc -mindepth 1 -not -type d -not -name copyright -delete
    find usr/share/doc -mindepth 1 -type d -empty -delete
    find usr/share/locale -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    find var/log -type f -delete
    # Docker provides these at run time.
    : >etc/resolv.conf; : >etc/hostname; : >etc/machine-id
  )
}
