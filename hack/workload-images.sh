#!/usr/bin/env bash
# make workload-images — the images the rook-minio module's pods run, built offline with no registry:
#
#   conductor-tf/minio:2026-02-12     the MinIO server (hack/tools.sh minio: github.com/minio/minio at
#                                     the commit of 2026-02-12, the newest the module proxy serves)
#   conductor-tf/s3client:v0.1.0      cmd/s3client: makes the module's bucket, and the S3 round trip
#                                     of make demo and the e2e suite
#
# Each is one static binary on an empty root (`docker import`), as the kind node's images are. The
# tags are the module's defaults (modules/rook-minio/variables.tf: image, client_image). Prints the
# image names, one a line. Idempotent: an image is rebuilt only when its binary changed (a label
# holds the binary's sha256).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MINIO_IMAGE=${MINIO_IMAGE:-conductor-tf/minio:2026-02-12}
S3CLIENT_IMAGE=${S3CLIENT_IMAGE:-conductor-tf/s3client:v0.1.0}
LABEL=org.conductor-tf.binary-sha256
log() { printf '[workload-images] %s\n' "$*" >&2; }
# shellcheck source=hack/lib/images.sh
source "$ROOT/hack/lib/images.sh"

"$ROOT/hack/tools.sh" minio
eval "$("$ROOT/hack/tools.sh" env)"
stage=$ROOT/bin/workloads
mkdir -p "$stage"
(cd "$ROOT" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o "$stage/s3client" ./cmd/s3client)

# image NAME BINARY ENTRYPOINT: (re)make NAME unless it already holds this very binary.
image() {
  local sum; sum=$(sha256sum "$2" | cut -c1-64)
  if [[ "$(docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null || true)" == "$sum" ]]; then
    log "$1 is up to date"
  else
    scratch_image "$1" "$2" "$3" "$LABEL=$sum"
    log "$1 built ($(docker image inspect -f '{{.Size}}' "$1" | numfmt --to=iec --suffix=B))"
  fi
  echo "$1"
}
image "$MINIO_IMAGE" "$CONDUCTOR_TF_WORKLOAD_BIN/minio" /usr/bin/minio
image "$S3CLIENT_IMAGE" "$stage/s3client" /usr/local/bin/s3client
