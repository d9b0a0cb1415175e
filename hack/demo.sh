#!/usr/bin/env bash
# make demo — the main job, from a fresh clone: a claim becomes an object store.
#
# With a Docker Engine, on a kind cluster (hack/demo-kind.sh): the controller's image installed, the
# rook-minio class runs a MinIO server for the claim, and a pod that mounts only the claim's
# connection Secret writes, lists and reads back an object; then the claim is deleted and the store
# goes with it. Without one (or with DEMO_ON=local), on a local control plane (hack/demo-local.sh),
# where no kubelet runs and the demo says what it cannot show.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case "${DEMO_ON:-auto}" in
  kind) exec "$ROOT/hack/demo-kind.sh" ;;
  local) exec "$ROOT/hack/demo-local.sh" ;;
  auto)
    if docker info >/dev/null 2>&1; then exec "$ROOT/hack/demo-kind.sh"; fi
    printf 'No Docker Engine answers: the demo runs on a local control plane, where no kubelet runs.\n'
    exec "$ROOT/hack/demo-local.sh" ;;
  *) echo "DEMO_ON must be auto, kind or local" >&2; exit 2 ;;
esac
