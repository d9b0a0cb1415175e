# Shared by the scripts that make images of static binaries with no base image (hack/kind-node-image.sh,
# hack/workload-images.sh). Source it; it defines functions only.

# scratch_image NAME BINARY ENTRYPOINT [LABEL=VALUE]: an image of one static binary at ENTRYPOINT,
# with /tmp, the users root (0), app (1000) and nobody (65534), and empty name-service files, made
# by `docker import` (no registry, no base image).
scratch_image() {
  local name=$1 bin=$2 entry=$3 label=${4:-} root
  root=$(mktemp -d)
  mkdir -p "$root$(dirname "$entry")" "$root/etc" "$root/tmp" "$root/var/run"
  chmod 1777 "$root/tmp"
  install -m 0755 "$bin" "$root$entry"
  # Names resolve (coredns), and programs that look up their user find one.
  printf 'root:x:0:0:root:/:/sbin/nologin\napp:x:1000:1000:app:/tmp:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\napp:x:1000:\nnogroup:x:65534:\n' >"$root/etc/group"
  : >"$root/etc/hosts"; : >"$root/etc/resolv.conf"; : >"$root/etc/nsswitch.conf"
  local changes=(--change "ENTRYPOINT [\"$entry\"]" --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin')
  [[ -n $label ]] && changes+=(--change "LABEL $label")
  tar -C "$root" --numeric-owner -c . | docker import "${changes[@]}" - "$name" >/dev/null
  rm -rf "$root"
}
