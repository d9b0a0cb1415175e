#!/usr/bin/env bash
# make validate-modules (opt-in): builds the hashicorp/aws and hashicorp/google providers from their
# Go modules into the mirror (large builds, once), then runs `init -backend=false` and `validate`
# on every module with each available binary (OpenTofu, and terraform when on PATH).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
"$ROOT/hack/tools.sh" all
"$ROOT/hack/tools.sh" cloud-providers
echo "[validate] providers ready after $(( $(date +%s) - start ))s"
set -a; eval "$("$ROOT/hack/tools.sh" env)"; set +a
bins=("$CONDUCTOR_TF_TOFU")
command -v terraform >/dev/null && bins+=("$(command -v terraform)")
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
rc=0
for bin in "${bins[@]}"; do
  for m in "$ROOT"/modules/*/; do
    name=$(basename "$m")
    dir=$work/$(basename "$bin")-$name
    cp -R "$m" "$dir"
    if (cd "$dir" && "$bin" init -backend=false -input=false -no-color >/dev/null && "$bin" validate -no-color); then
      echo "[validate] $(basename "$bin") $name: ok"
    else
      echo "[validate] $(basename "$bin") $name: FAILED"; rc=1
    fi
  done
done
echo "[validate] done in $(( $(date +%s) - start ))s"
exit $rc
