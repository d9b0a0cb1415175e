#!/usr/bin/env bash
# make test-image — the controller image, tested as a platform team would install it, with no
# registry and no kubelet:
#   1. `make docker-build` (offline base, provider mirror baked in) from whatever the engine holds;
#   2. a local control plane of its own (ports 17543/13479/13480, removed at the end);
#   3. `make build-installer` → dist/install.yaml passes a server-side dry-run, then is applied;
#   4. the image runs with `docker run` (host network, read-only root filesystem, non-root) as the
#      installer's ServiceAccount, through a token kubeconfig, so the generated RBAC is what it has;
#   5. the sample rook-minio class and claim become Bound and Ready, the connection Secret appears;
#   6. metrics answer over HTTPS only to a token allowed to get /metrics (401 without, 403 for
#      another account), with the run series filled in;
#   7. the claim is deleted: the module's objects, the state and the resource go;
#   8. `docker stop` (SIGTERM) stops the manager cleanly within its grace period.
# Exit 0 on success; rerunnable.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
DIR=$CACHE/test-image
export CLUSTER_DIR=$DIR/cluster
export APISERVER_PORT=17543 ETCD_PORT=13479 ETCD_PEER_PORT=13480
IMG=${TEST_IMG:-conductor-tf/controller:test}
NAME=conductor-tf-test-image
METRICS=127.0.0.1:18443 PROBES=127.0.0.1:18081
NS=demo SYS=conductor-system SA=conductor-tf-controller-manager
TIMEOUT=${TEST_IMAGE_TIMEOUT:-300}
REMOTE=git::https://github.com/conductor-tf/conductor-tf.git
START=$(date +%s)

step() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
fail() { printf '\ntest-image failed: %s\n' "$*" >&2; exit 1; }

cleanup() {
  local rc=$?
  if (( rc != 0 )); then
    echo "--- the manager's log (last 40 lines) ---" >&2
    docker logs "$NAME" 2>&1 | tail -40 >&2 || true
  fi
  docker rm -f "$NAME" >/dev/null 2>&1 || true
  "$ROOT/hack/cluster.sh" down >/dev/null 2>&1 || true
  (( rc == 0 )) && printf '\ntest-image passed in %ss\n' "$(( $(date +%s) - START ))"
  exit $rc
}
trap cleanup EXIT

step "Image $IMG (offline, provider mirror baked in)"
t0=$(date +%s)
IMG=$IMG PROVIDER_MIRROR=true "$ROOT/hack/docker-build.sh"
info "built in $(( $(date +%s) - t0 ))s; size $(( $(docker image inspect "$IMG" --format '{{.Size}}') / 1024 / 1024 )) MiB"
info "user $(docker image inspect "$IMG" --format '{{.Config.User}}'), entrypoint $(docker image inspect "$IMG" --format '{{json .Config.Entrypoint}}')"

step "Local control plane"
"$ROOT/hack/tools.sh" k8s
eval "$("$ROOT/hack/tools.sh" env)"
k() { "$CONDUCTOR_TF_K8S_BIN/kubectl" --kubeconfig "$CLUSTER_DIR/kubeconfig" "$@"; }
docker rm -f "$NAME" >/dev/null 2>&1 || true
"$ROOT/hack/cluster.sh" down >/dev/null 2>&1 || true
"$ROOT/hack/cluster.sh" up

step "make build-installer: server-side dry-run, then apply"
(cd "$ROOT" && make --no-print-directory build-installer IMG="$IMG" >/dev/null)
k create namespace "$SYS" >/dev/null
k apply --server-side --dry-run=server -f "$ROOT/dist/install.yaml" >"$DIR/dry-run.txt" || fail "server-side dry-run of dist/install.yaml"
info "dry-run: $(wc -l <"$DIR/dry-run.txt") objects accepted"
k apply --server-side -f "$ROOT/dist/install.yaml" >/dev/null
k apply --server-side -f "$ROOT/test/fixtures/crds" >/dev/null
k wait --for=condition=Established crd --all --timeout=60s >/dev/null
k apply -f "$ROOT/config/samples/rook_minio_rbac.yaml" >/dev/null
k create namespace "$NS" >/dev/null

step "The manager, as the installer's ServiceAccount, in a read-only non-root container"
mkdir -p "$DIR/kube"
token=$(k create token "$SA" -n "$SYS" --duration=2h)
cat >"$DIR/kube/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$CLUSTER_DIR/pki/ca.crt")
users:
- name: $SA
  user:
    token: $token
contexts:
- name: local
  context: {cluster: local, user: $SA}
current-context: local
KC
chmod 0644 "$DIR/kube/kubeconfig"
# The modules' repository, owned by the container's user (git refuses a repository of another
# owner) and mounted where that user can reach it.
"$ROOT/hack/publish-modules.sh" "$DIR/modules.git" v0.1.0 >/dev/null
chown -R 65532:65532 "$DIR/modules.git"
MODULES_URL=git::file:///srv/modules.git
docker run -d --name "$NAME" --network host --read-only \
  --tmpfs /tmp:rw,exec,size=512m --tmpfs /work:rw,exec,uid=65532,gid=65532,size=2g \
  -v "$DIR/kube:/etc/conductor-tf:ro" -e KUBECONFIG=/etc/conductor-tf/kubeconfig \
  -v "$DIR/modules.git:/srv/modules.git:ro" \
  "$IMG" --leader-elect --namespace "$SYS" --work-dir /work --grace-period 20s \
  --state-encryption-secret conductor-tf-state-key \
  --metrics-bind-address "$METRICS" --health-probe-bind-address "$PROBES" >/dev/null
for _ in $(seq 60); do curl -sf "http://$PROBES/readyz" >/dev/null && break; sleep 1; done
curl -sf "http://$PROBES/readyz" >/dev/null || fail "the manager is not ready"
info "ready; $(docker exec "$NAME" id); root filesystem: $(docker exec "$NAME" sh -c 'touch /probe 2>&1 || true')"

step "The sample class and claim"
# No kubelet runs here: the class asks for the ObjectStore object (server: rook-objectstore) instead
# of a MinIO server whose pod could not start.
sed "s|$REMOTE|$MODULES_URL|" "$ROOT/config/samples/objectstore_class.yaml" | k apply -f - >/dev/null
k patch infraclass minio-standard --type merge -p '{"spec":{"variables":{"server":"rook-objectstore"}}}' >/dev/null
k wait --for=condition=Ready infraclass/minio-standard --timeout=120s >/dev/null \
  || fail "class not Ready: $(k get infraclass minio-standard -o jsonpath='{.status.conditions}')"
sed "s|namespace: default|namespace: $NS|" "$ROOT/config/samples/objectstore_claim.yaml" | k apply -f - >/dev/null
k wait --for=condition=Ready "infraclaim/assets" -n "$NS" --timeout="${TIMEOUT}s" >/dev/null \
  || fail "claim not Ready: $(k get infraclaim assets -n "$NS" -o jsonpath='{.status.conditions}')"
RES=$(k get infraclaim assets -n "$NS" -o jsonpath='{.status.resourceName}')
info "claim assets: $(k get infraclaim assets -n "$NS" -o jsonpath='{.status.phase}'), resource $RES"
k get secret assets-s3 -n "$NS" >/dev/null || fail "no connection Secret assets-s3 in $NS"
STORE=minio-$RES # the sample names the store after the resource
k get objectstores.minio.rook.io -n "$STORE" -o name | grep -q . || fail "no ObjectStore made"
info "run: $(k get infraresource "$RES" -o jsonpath='{.status.lastRun.operation} {.status.lastRun.result} by {.status.lastRun.controller} (holder {.status.lastRun.who})')"
# The state the image's tofu wrote is OpenTofu-encrypted (the manager created the key Secret).
k get secret conductor-tf-state-key -n "$SYS" >/dev/null || fail "no state key Secret conductor-tf-state-key"
SFX=$(k get infraresource "$RES" -o jsonpath='{.status.state.secretName}')
k get secret "$SFX" -n "$SYS" -o jsonpath='{.data.tfstate}' | base64 -d | gunzip | grep -q '"encryption_version"' \
  || fail "state $SFX is not encrypted"
info "state $SFX: encrypted"

step "Metrics over HTTPS, authorized through the API server"
k create serviceaccount scraper -n "$SYS" >/dev/null
k create clusterrolebinding conductor-tf-scraper --clusterrole=conductor-tf-metrics-reader --serviceaccount="$SYS:scraper" >/dev/null
k create serviceaccount stranger -n "$SYS" >/dev/null
code() { curl -sk -o /dev/null -w '%{http_code}' "$@" "https://$METRICS/metrics"; }
[[ $(code) == 401 ]] || fail "metrics without a token: $(code), want 401"
[[ $(code -H "Authorization: Bearer $(k create token stranger -n "$SYS")") == 403 ]] || fail "metrics for an account without access: want 403"
scrape=$(curl -sfk -H "Authorization: Bearer $(k create token scraper -n "$SYS")" "https://$METRICS/metrics") || fail "metrics with the scraper's token"
for series in 'conductor_tf_run_duration_seconds_count{operation="apply",result="Succeeded"}' conductor_tf_runs_in_flight \
  conductor_tf_run_wait_seconds_count conductor_tf_claim_ready_seconds_count 'conductor_tf_resources{phase="Bound"}' \
  conductor_tf_state_lock_conflicts_total; do
  line=$(grep -F "$series" <<<"$scrape" | grep -v '^#' | head -1) || fail "metric $series missing"
  info "$line"
done

step "Deleting the claim (reclaim policy Delete)"
k delete infraclaim assets -n "$NS" --wait=false >/dev/null
k wait --for=delete "infraresource/$RES" --timeout="${TIMEOUT}s" >/dev/null || fail "resource $RES still exists"
k wait --for=delete "namespace/$STORE" --timeout=120s >/dev/null || fail "the module's namespace still exists"
[[ -z $(k get secret -n "$SYS" -l "conductor.io/resource=$RES" -o name) ]] || fail "state Secrets of $RES left"
info "resource, module objects and state are gone"

step "docker stop: SIGTERM"
t0=$(date +%s)
docker stop -t 60 "$NAME" >/dev/null
rc=$(docker inspect "$NAME" --format '{{.State.ExitCode}}')
info "exited $rc after $(( $(date +%s) - t0 ))s"
[[ $rc == 0 ]] || fail "the manager exited $rc on SIGTERM"
