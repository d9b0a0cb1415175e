#!/usr/bin/env bash
# make prepare-images — builds, ahead of time, every image make test-image and make test-e2e use,
# so that .ci/run can build them beside make test (at `nice 19`) instead of after it:
#   1. the offline base image (hack/base-image.sh: debootstrap, mostly download and unpack);
#   2. the kind node image (hack/kind-node-image.sh: the node's binaries, debootstrap);
#   3. the rook-minio module's images (hack/workload-images.sh: the MinIO server, cmd/s3client);
#   4. the controller images of both suites (hack/docker-build.sh, provider mirror baked in).
# Each step is the script the suites run themselves, cached and idempotent: a suite that finds the
# image built from the same recipe goes on at once. hack/tools.sh holds a lock per part it builds,
# so this script and make test's `make tools` may run at the same time.
#
# Exit 0 when every image is built; the first failing step's status otherwise.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
log() { printf '[prepare-images] %s\n' "$*" >&2; }
# step LABEL COMMAND...: runs COMMAND (its stdout, the image's name, dropped) and logs its time.
step() {
  local label=$1 t; shift; t=$(date +%s)
  "$@" >/dev/null
  log "$label done in $(( $(date +%s) - t ))s"
}

start=$(date +%s)
step "base image" "$ROOT/hack/base-image.sh"
step "kind node image" "$ROOT/hack/kind-node-image.sh"
step "workload images" "$ROOT/hack/workload-images.sh"
step "controller image (test-image)" env IMG="${TEST_IMG:-conductor-tf/controller:test}" PROVIDER_MIRROR=true "$ROOT/hack/docker-build.sh"
step "controller image (e2e)" env IMG="${E2E_IMG:-conductor-tf/controller:e2e}" PROVIDER_MIRROR=true "$ROOT/hack/docker-build.sh"
log "every image built in $(( $(date +%s) - start ))s"
