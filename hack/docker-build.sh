#!/usr/bin/env bash
# make docker-build — builds the controller image with no registry: the manager and the pinned
# OpenTofu are compiled on the host (Go module proxy only) into bin/image/, and the Dockerfile's
# `prebuilt` stage puts them on the base image that `make base-image` makes with debootstrap.
#
#   IMG=conductor-tf/controller:dev   the tag to build
#   BASE_IMAGE=…                      another base already in the engine (e.g. debian:bookworm-slim);
#                                     empty: the offline base (hack/base-image.sh)
#   PROVIDER_MIRROR=true              bake the provider mirror (hack/tools.sh providers) into the
#                                     image and point TF_CLI_CONFIG_FILE at it (`prebuilt-mirror`)
#   CLOUD_PROVIDERS_IN_IMAGE="aws"    cloud providers to bake in too, when built (hack/tools.sh
#                                     aws-provider): make test-e2e's workload identity image
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMG=${IMG:-conductor-tf/controller:dev}
BASE_IMAGE=${BASE_IMAGE:-}
PROVIDER_MIRROR=${PROVIDER_MIRROR:-false}
CLOUD_PROVIDERS_IN_IMAGE=${CLOUD_PROVIDERS_IN_IMAGE:-}
log() { printf '[docker-build] %s\n' "$*" >&2; }
start=$(date +%s)

"$ROOT/hack/tools.sh" tofu
[[ $PROVIDER_MIRROR == true ]] && "$ROOT/hack/tools.sh" providers
eval "$("$ROOT/hack/tools.sh" env)"
if [[ -z $BASE_IMAGE ]]; then
  BASE_IMAGE=$("$ROOT/hack/base-image.sh" | tail -1)
fi

stage=$ROOT/bin/image
rm -rf "$stage"; mkdir -p "$stage"
log "building the manager"
(cd "$ROOT" && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o "$stage/manager" ./cmd/conductor-tf)
cp "$CONDUCTOR_TF_TOFU" "$stage/tofu"

target=prebuilt
if [[ $PROVIDER_MIRROR == true ]]; then
  target=prebuilt-mirror
  # The image runs OpenTofu, which installs hashicorp/* from registry.opentofu.org: only that
  # hostname's plugins go in (a module naming registry.terraform.io/… installs from there).
  # The cloud providers (make test-modules builds them into the same mirror: 1 GB with aws) stay out
  # unless CLOUD_PROVIDERS_IN_IMAGE names them.
  for dir in "$CONDUCTOR_TF_PROVIDER_MIRROR"/registry.opentofu.org/*/*; do
    if [[ " $CONDUCTOR_TF_CLOUD_PROVIDERS " == *" $(basename "$dir") "* && " $CLOUD_PROVIDERS_IN_IMAGE " != *" $(basename "$dir") "* ]]; then
      continue
    fi
    ns=$stage/providers/mirror/registry.opentofu.org/$(basename "$(dirname "$dir")")
    mkdir -p "$ns"; cp -a "$dir" "$ns/"
  done
  # The mirror serves the providers it holds; every other provider is installed from its registry.
  mapfile -t have < <(cd "$stage/providers/mirror" && find . -mindepth 3 -maxdepth 3 -type d | sed 's|^\./||' | sort)
  list=$(printf '"%s", ' "${have[@]}"); list=${list%, }
  cat >"$stage/providers/terraform.rc" <<RC
# The image's provider mirror (make docker-build PROVIDER_MIRROR=true).
provider_installation {
  filesystem_mirror {
    path    = "/opt/conductor-tf/providers/mirror"
    include = [$list]
  }
  direct {
    exclude = [$list]
  }
}
RC
fi

log "docker build --target $target (base $BASE_IMAGE) -t $IMG"
# The legacy builder (no buildx here) builds the stages up to the target, in order: the builder
# stage, which needs a Go image from a registry, comes after the offline targets and is not built.
out=$(mktemp); trap 'rm -f "$out"' EXIT
if ! DOCKER_BUILDKIT=0 docker build --target "$target" --build-arg "BASE_IMAGE=$BASE_IMAGE" -t "$IMG" "$ROOT" >"$out" 2>&1; then
  cat "$out" >&2; log "docker build failed"; exit 1
fi
grep -e '^Step' -e '^Successfully' "$out" >&2 || true
size=$(docker image inspect "$IMG" --format '{{.Size}}')
log "built $IMG: $((size / 1024 / 1024)) MiB in $(( $(date +%s) - start ))s"
