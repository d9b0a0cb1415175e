# Shared by the scripts that make a kind cluster from the offline node image (hack/test-e2e.sh,
# hack/demo-kind.sh). Source it after `eval "$(hack/tools.sh env)"`; it defines functions only.
# info must be defined by the script that sources it.

# KIND_PATH is the PATH kind runs with: the caller's, or the wrapper's first (kind_probe_engine).
KIND_PATH=$PATH

# kind_ ARGS...: the pinned kind, with the docker it finds on KIND_PATH.
kind_() { PATH=$KIND_PATH "$CONDUCTOR_TF_KIND" "$@"; }

# kind_probe_engine NODE_IMAGE WRAPPER_DIR: probes the engine once; when it refuses privileged
# containers, kind alone runs with hack/kind/docker first on its PATH (nothing on the host changes).
kind_probe_engine() {
  local node_image=$1 wrap=$2 root
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if docker run --rm --privileged --entrypoint /bin/true "$node_image" >/dev/null 2>&1; then
    info "privileged containers run: kind runs unchanged"
  else
    mkdir -p "$wrap"
    ln -sfn "$root/hack/kind/docker" "$wrap/docker"
    export CONDUCTOR_TF_REAL_DOCKER; CONDUCTOR_TF_REAL_DOCKER=$(command -v docker)
    KIND_PATH=$wrap:$PATH
    info "refused: kind runs with hack/kind/docker first on its PATH"
  fi
}

# kind_gateway: the IPv4 gateway of the kind network, where pods reach the host.
kind_gateway() {
  docker network inspect kind --format '{{range .IPAM.Config}}{{.Gateway}} {{end}}' | tr ' ' '\n' | grep -E '^[0-9.]+$' | head -1
}
