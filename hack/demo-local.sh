#!/usr/bin/env bash
# make demo without a Docker Engine (hack/demo.sh picks it; DEMO_ON=local forces it): prepare the
# tools, start a local control plane, install the CRDs, start the controller, apply the rook-minio
# class and a claim, wait until the claim is Bound and Ready, show what it made, delete the claim,
# show the reclaim, stop everything.
#
# No kubelet runs on this control plane, so no pod can start: the class asks for a Rook-style
# ObjectStore object (server: rook-objectstore) instead of the MinIO server the module runs by
# default, and the demo says so. hack/demo-kind.sh shows the real object store.
#
# The demo runs its own control plane (DEMO_CLUSTER_DIR, ports 16543/12479/12480), separate from
# `make cluster-up`, and removes it at the end, so it can be rerun at will. Exit 0 on success.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
DEMO_DIR=$CACHE/demo
export CLUSTER_DIR=${DEMO_CLUSTER_DIR:-$DEMO_DIR/cluster}
export APISERVER_PORT=${DEMO_APISERVER_PORT:-16543} ETCD_PORT=${DEMO_ETCD_PORT:-12479} ETCD_PEER_PORT=${DEMO_ETCD_PEER_PORT:-12480}
NS=demo
TIMEOUT=${DEMO_TIMEOUT:-300}
REMOTE=git::https://github.com/conductor-tf/conductor-tf.git
START=$(date +%s)

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
info() { printf '    %s\n' "$*"; }
fail() { printf '\n\033[31mdemo failed: %s\033[0m\n' "$*" >&2; exit 1; }
elapsed() { echo "$(( $(date +%s) - START ))s"; }

CONTROLLER_PID=
cleanup() {
  local rc=$?
  if [[ -n $CONTROLLER_PID ]] && kill -0 "$CONTROLLER_PID" 2>/dev/null; then
    kill -INT "$CONTROLLER_PID" 2>/dev/null || true
    wait "$CONTROLLER_PID" 2>/dev/null || true
  fi
  if (( rc != 0 )) && [[ -f $DEMO_DIR/controller.log ]]; then
    echo "--- last lines of the controller's log ($DEMO_DIR/controller.log) ---" >&2
    tail -20 "$DEMO_DIR/controller.log" >&2 || true
  fi
  "$ROOT/hack/cluster.sh" down >/dev/null 2>&1 || true
  (( rc == 0 )) && printf '\n\033[32mdemo passed in %s\033[0m\n' "$(elapsed)"
  exit $rc
}
trap cleanup EXIT

step "Tools (built once into $CACHE, reused afterwards)"
"$ROOT/hack/tools.sh" all
set -a; eval "$("$ROOT/hack/tools.sh" env)"; set +a
KUBECTL=$CONDUCTOR_TF_K8S_BIN/kubectl
export PATH=$CONDUCTOR_TF_K8S_BIN:$PATH

step "Local control plane (etcd, kube-apiserver, kube-controller-manager)"
"$ROOT/hack/cluster.sh" down >/dev/null 2>&1 || true  # what a failed earlier run left
"$ROOT/hack/cluster.sh" up
export KUBECONFIG=$CLUSTER_DIR/kubeconfig
k() { "$KUBECTL" "$@"; }

step "CRDs: conductor.io, and Rook's MinIO ObjectStore (the module's target)"
k apply --server-side -f "$ROOT/config/crd/bases" -f "$ROOT/test/fixtures/crds" >/dev/null
k wait --for=condition=Established crd --all --timeout=60s >/dev/null
k create namespace conductor-system --dry-run=client -o yaml | k apply -f - >/dev/null
k create namespace "$NS" --dry-run=client -o yaml | k apply -f - >/dev/null
k get crd -o name | sed 's/^/    /'

step "Modules published as a git repository tagged v0.1.0 (stands in for $REMOTE)"
MODULES_URL=$("$ROOT/hack/publish-modules.sh" "$DEMO_DIR/modules.git" v0.1.0)
info "$MODULES_URL//modules/rook-minio?ref=v0.1.0"

step "Controller (tofu $(TF_CLI_CONFIG_FILE=/dev/null "$CONDUCTOR_TF_TOFU" version | head -1 | cut -d' ' -f2), state in Secrets of conductor-system)"
(cd "$ROOT" && go build -o "$ROOT/bin/conductor-tf" ./cmd/conductor-tf)
rm -rf "$DEMO_DIR/work"
"$ROOT/bin/conductor-tf" --terraform-path "$CONDUCTOR_TF_TOFU" --work-dir "$DEMO_DIR/work" \
  --namespace conductor-system --health-probe-bind-address 0 --zap-devel=false >"$DEMO_DIR/controller.log" 2>&1 &
CONTROLLER_PID=$!
info "pid $CONTROLLER_PID, log $DEMO_DIR/controller.log"

step "The platform team's class: minio-standard (default for ObjectStore)"
info "runs get no credentials of the controller's: the class grants the ServiceAccount conductor-tf-module-rook-minio (config/samples/rook_minio_rbac.yaml)"
k apply -f "$ROOT/config/samples/rook_minio_rbac.yaml" >/dev/null
sed "s|$REMOTE|$MODULES_URL|" "$ROOT/config/samples/objectstore_class.yaml" | k apply -f -
info "no kubelet runs on this control plane: the MinIO server's pod could not start, so the class"
info "asks for Rook's ObjectStore object instead (server: rook-objectstore); nothing serves it here"
k patch infraclass minio-standard --type merge -p '{"spec":{"variables":{"server":"rook-objectstore"}}}' >/dev/null
k wait --for=condition=Ready infraclass/minio-standard --timeout=120s >/dev/null || fail "the class did not become Ready: $(k get infraclass minio-standard -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"
info "Ready: $(k get infraclass minio-standard -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"
info "inputs: $(k get infraclass minio-standard -o jsonpath='{.status.inputs[*].name}')"

step "The application team's claim: assets (8Gi of object storage) in namespace $NS"
sed "s|namespace: default|namespace: $NS|" "$ROOT/config/samples/objectstore_claim.yaml" | k apply -f -

step "Waiting until the claim is Bound and Ready"
last="" t0=$(date +%s)
while :; do
  phase=$(k get infraclaim assets -n "$NS" -o jsonpath='{.status.phase}' 2>/dev/null || true)
  ready=$(k get infraclaim assets -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
  why=$(k get infraclaim assets -n "$NS" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null || true)
  now="phase=${phase:-?} ready=${ready:-?} (${why:-…})"
  [[ $now != "$last" ]] && info "[$(( $(date +%s) - t0 ))s] claim assets: $now"
  last=$now
  [[ $phase == Bound && $ready == True ]] && break
  (( $(date +%s) - t0 > TIMEOUT )) && fail "claim not Ready after ${TIMEOUT}s: $now"
  kill -0 "$CONTROLLER_PID" 2>/dev/null || fail "the controller exited"
  sleep 2
done
RES=$(k get infraclaim assets -n "$NS" -o jsonpath='{.status.resourceName}')
STORE=minio-$RES # the sample names the store after the resource

step "kubectl get conductor -A"
k get conductor -A

step "The claim's connection Secret (assets-s3): keys"
k get secret assets-s3 -n "$NS" -o go-template='{{range $k, $v := .data}}{{printf "    %s\n" $k}}{{end}}'
info "endpoint = $(k get secret assets-s3 -n "$NS" -o jsonpath='{.data.endpoint}' | base64 -d)"

step "The state Secret (conductor-system) and the resource's last run"
k get secret -n conductor-system -l "conductor.io/resource=$RES"
info "$(k get infraresource "$RES" -o jsonpath='lastRun: {.status.lastRun.operation} {.status.lastRun.result}, plan +{.status.lastRun.summary.add} ~{.status.lastRun.summary.change} -{.status.lastRun.summary.destroy}; state serial {.status.state.serial}')"

step "What the module created (namespace $STORE)"
k get namespace "$STORE"
k get secrets,objectstores.minio.rook.io -n "$STORE"

step "Deleting the claim: reclaim policy Delete destroys the infrastructure, then the state, then the resource"
k delete infraclaim assets -n "$NS" --wait=false
k wait --for=delete "infraresource/$RES" --timeout="${TIMEOUT}s" >/dev/null || fail "resource $RES still exists after ${TIMEOUT}s"
k wait --for=delete "namespace/$STORE" --timeout=120s >/dev/null || fail "namespace $STORE still exists"
info "infraresource $RES: $(k get infraresource "$RES" 2>&1 | tail -1)"
info "objectstores: $(k get objectstores.minio.rook.io -A 2>&1 | tail -1)"
info "namespace $STORE: $(k get namespace "$STORE" 2>&1 | tail -1)"
info "state Secrets: $(k get secret -n conductor-system -l "conductor.io/resource=$RES" 2>&1 | tail -1)"
k delete infraclass minio-standard >/dev/null

step "What this demo could not show"
info "No kubelet runs on this control plane, so no object store served the claim: the ObjectStore"
info "object above waits for an operator. With a Docker Engine, make demo runs on a kind cluster, where"
info "the same class runs a MinIO server and the demo writes and reads an object through assets-s3."

step "Stopping the controller and the control plane"
