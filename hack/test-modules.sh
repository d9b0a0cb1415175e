#!/usr/bin/env bash
# make test-modules — the cloud modules through classes and claims (test/modules, build tag
# modules): gcs-bucket applied and destroyed against fake-gcs-server, aws-rds planned with fake
# credentials and endpoints on loopback, both with the real providers. Builds what it needs first
# (hack/tools.sh cloud-providers: the aws and google providers and fake-gcs-server, cached; cold,
# 52 minutes here on 2 cores beside other builds, the aws provider most of it).
#
# TEST_MODULES_TIMEOUT=30m   the suite's go test -timeout
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
"$ROOT/hack/tools.sh" all
"$ROOT/hack/tools.sh" cloud-providers
echo "[test-modules] tools ready after $(( $(date +%s) - start ))s"
set -a; eval "$("$ROOT/hack/tools.sh" env)"; set +a
cd "$ROOT"
go test -tags modules ./test/modules -count 1 -timeout "${TEST_MODULES_TIMEOUT:-30m}" -v -args -ginkgo.v
echo "[test-modules] passed in $(( $(date +%s) - start ))s"
