#!/usr/bin/env bash
# Publishes the repository's modules/ as a git repository with a version tag, so that classes fetch
# a module at a version exactly as they would from a remote:
#
#   hack/publish-modules.sh DEST TAG
#
# DEST receives modules/<name>/ at tag TAG; a class then uses
#   source: git::file://DEST//modules/<name>   version: TAG
# which is what the samples' git::https://github.com/conductor-tf/conductor-tf.git//modules/<name>
# becomes offline (see SAMPLES_REMOTE below and hack/demo.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:?usage: $0 DEST TAG}
TAG=${2:?usage: $0 DEST TAG}
rm -rf "$DEST"
mkdir -p "$DEST"
cp -R "$ROOT/modules" "$DEST/modules"
cd "$DEST"
git init -q
git add -A
git -c user.name=conductor-tf -c user.email=conductor-tf@localhost -c commit.gpgsign=false commit -qm "modules $TAG"
git -c tag.gpgsign=false tag "$TAG"
echo "git::file://$DEST"
