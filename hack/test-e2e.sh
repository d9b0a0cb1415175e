#!/usr/bin/env bash
# make test-e2e — conductor-tf installed on a real kind cluster, with no registry:
#   1. the kind node image (hack/kind-node-image.sh) and the controller image (hack/docker-build.sh),
#      both built offline, and dist/install.yaml for that image;
#   2. the engine is probed once: if it refuses privileged containers, kind alone runs with
#      hack/kind/docker first on PATH (nothing on the host changes);
#   3. `kind create cluster` (one node, test/e2e/kind-config.yaml), `kind load docker-image`;
#   4. the Ginkgo suite test/e2e (build tag e2e) against that cluster;
#   5. the cluster is deleted, whatever happened.
#
# E2E_KEEP_CLUSTER=1     keep the cluster afterwards (its kubeconfig is printed)
# E2E_FOCUS=regexp       run only the specs whose text matches
# E2E_TIMEOUT=60m        the suite's go test -timeout
#
# Where the aws provider is built (hack/tools.sh aws-provider; CI does not build it), a second
# controller image with it in its mirror (E2E_AWS_IMG) is loaded too, for the runner pool of the
# workload identity spec; without it that spec is skipped.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
DIR=$CACHE/test-e2e
CLUSTER=${E2E_CLUSTER:-conductor-e2e}
IMG=${E2E_IMG:-conductor-tf/controller:e2e}
START=$(date +%s)

step() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }

set -a; eval "$("$ROOT/hack/tools.sh" env)"; set +a
mkdir -p "$DIR"
KUBECONFIG_E2E=$DIR/kubeconfig

# kind runs the docker it finds on PATH (kind_, kind_probe_engine).
# shellcheck source=hack/lib/kind.sh
source "$ROOT/hack/lib/kind.sh"

cleanup() {
  local rc=$?
  if [[ ${E2E_KEEP_CLUSTER:-0} == 1 ]]; then
    info "cluster $CLUSTER kept: KUBECONFIG=$KUBECONFIG_E2E"
  else
    kind_ delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  (( rc == 0 )) && printf '\ntest-e2e passed in %ss\n' "$(( $(date +%s) - START ))"
  exit $rc
}

step "Tools (kind, the node's binaries)"
"$ROOT/hack/tools.sh" all
"$ROOT/hack/tools.sh" kind
"$CONDUCTOR_TF_KIND" version

step "Node image"
t=$(date +%s)
NODE_IMAGE=$("$ROOT/hack/kind-node-image.sh")
info "$NODE_IMAGE ready in $(( $(date +%s) - t ))s"

step "Controller image $IMG and dist/install.yaml"
t=$(date +%s)
IMG=$IMG PROVIDER_MIRROR=true "$ROOT/hack/docker-build.sh"
(cd "$ROOT" && make --no-print-directory build-installer IMG="$IMG" >/dev/null)
info "built in $(( $(date +%s) - t ))s"

AWS_IMG=
if "$ROOT/hack/tools.sh" aws-provider-built; then
  step "Controller image with the aws provider (the workload identity spec's runner pool)"
  t=$(date +%s)
  AWS_IMG=${IMG%:*}:e2e-aws
  IMG=$AWS_IMG PROVIDER_MIRROR=true CLOUD_PROVIDERS_IN_IMAGE=aws "$ROOT/hack/docker-build.sh"
  info "built in $(( $(date +%s) - t ))s"
fi

step "The rook-minio module's images (the MinIO server, cmd/s3client)"
t=$(date +%s)
mapfile -t WORKLOAD_IMAGES < <("$ROOT/hack/workload-images.sh")
info "${WORKLOAD_IMAGES[*]} ready in $(( $(date +%s) - t ))s"

step "Probing the engine for privileged containers"
kind_probe_engine "$NODE_IMAGE" "$DIR/docker-wrapper"

trap cleanup EXIT
step "kind create cluster $CLUSTER"
t=$(date +%s)
kind_ delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
kind_ create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --config "$ROOT/test/e2e/kind-config.yaml" \
  --kubeconfig "$KUBECONFIG_E2E" --wait 5m
info "created in $(( $(date +%s) - t ))s"
t=$(date +%s)
kind_ load docker-image "$IMG" ${AWS_IMG:+"$AWS_IMG"} "${WORKLOAD_IMAGES[@]}" --name "$CLUSTER"
info "image loaded in $(( $(date +%s) - t ))s"

step "The e2e suite"
cd "$ROOT"
# The suite's output goes to the terminal and to $DIR/suite.log; when it fails, what the failed
# specs printed and their failure messages are printed again at the end (hack/lib/e2e-digest.sh).
# shellcheck source=hack/lib/e2e-digest.sh
source "$ROOT/hack/lib/e2e-digest.sh"
if ! E2E_KUBECONFIG=$KUBECONFIG_E2E E2E_IMG=$IMG E2E_AWS_IMG=$AWS_IMG E2E_CLUSTER=$CLUSTER \
  go test -tags e2e ./test/e2e -count 1 -timeout "${E2E_TIMEOUT:-60m}" -v \
  -args -ginkgo.v ${E2E_FOCUS:+-ginkgo.focus="$E2E_FOCUS"} 2>&1 | tee "$DIR/suite.log"; then
  step "What the failed specs printed (the whole output: $DIR/suite.log)"
  e2e_digest "$DIR/suite.log"
  exit 1
fi
