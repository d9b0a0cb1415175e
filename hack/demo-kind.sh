#!/usr/bin/env bash
# make demo with a Docker Engine: the main job on a real cluster, from a fresh clone.
#
#   1. tools, the kind node image, the controller image and the rook-minio module's images, all
#      built offline and cached (hack/tools.sh, kind-node-image.sh, docker-build.sh,
#      workload-images.sh);
#   2. a one-node kind cluster (conductor-demo), the images loaded, conductor-tf installed from
#      kustomize (the manager pod, its RBAC and CRDs), the modules served to it over git's HTTP
#      protocol from this host;
#   3. the platform team's class minio-standard and the application team's claim assets (8Gi):
#      the module runs a MinIO server with an 8Gi volume, makes the bucket, and the claim's
#      connection Secret assets-s3 gets the endpoint, bucket and keys;
#   4. a pod that mounts only assets-s3 writes, lists and reads back an object with an S3 client;
#   5. the claim is deleted: the server, its volume and the Secret go; then the cluster.
#
# DEMO_KEEP_CLUSTER=1 keeps the cluster (its kubeconfig is printed); DEMO_TIMEOUT (s, default 300).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
DIR=$CACHE/demo-kind
CLUSTER=${DEMO_CLUSTER:-conductor-demo}
IMG=${DEMO_IMG:-conductor-tf/controller:dev}
NS=demo
TIMEOUT=${DEMO_TIMEOUT:-300}
REMOTE=git::https://github.com/conductor-tf/conductor-tf.git
START=$(date +%s)

step() { printf '\n\033[1m==> %s\033[0m  [%s]\n' "$*" "$(elapsed)"; }
info() { printf '    %s\n' "$*"; }
fail() { printf '\n\033[31mdemo failed: %s\033[0m\n' "$*" >&2; exit 1; }
elapsed() { echo "$(( $(date +%s) - START ))s"; }

mkdir -p "$DIR"
set -a; eval "$("$ROOT/hack/tools.sh" env)"; set +a
# shellcheck source=hack/lib/kind.sh
source "$ROOT/hack/lib/kind.sh"
export KUBECONFIG=$DIR/kubeconfig
k() { "$CONDUCTOR_TF_K8S_BIN/kubectl" "$@"; }

SERVER_PID=
cleanup() {
  local rc=$?
  [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null
  if (( rc != 0 )); then
    echo "--- the manager's last log lines ---" >&2
    k -n conductor-system logs deploy/conductor-tf-controller-manager --tail=20 >&2 2>/dev/null || true
  fi
  if [[ ${DEMO_KEEP_CLUSTER:-0} == 1 ]]; then
    info "cluster $CLUSTER kept: KUBECONFIG=$KUBECONFIG"
  else
    kind_ delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  (( rc == 0 )) && printf '\n\033[32mdemo passed in %s\033[0m\n' "$(elapsed)"
  exit $rc
}

step "Tools and images (built once into $CACHE and the engine, reused afterwards)"
"$ROOT/hack/tools.sh" all
"$ROOT/hack/tools.sh" kind
NODE_IMAGE=$("$ROOT/hack/kind-node-image.sh")
IMG=$IMG PROVIDER_MIRROR=true "$ROOT/hack/docker-build.sh" >/dev/null
mapfile -t WORKLOADS < <("$ROOT/hack/workload-images.sh")
info "node $NODE_IMAGE, controller $IMG, module images ${WORKLOADS[*]}"

step "A one-node kind cluster ($CLUSTER)"
kind_probe_engine "$NODE_IMAGE" "$DIR/docker-wrapper"
trap cleanup EXIT
kind_ delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
kind_ create cluster --name "$CLUSTER" --image "$NODE_IMAGE" --config "$ROOT/test/e2e/kind-config.yaml" \
  --kubeconfig "$KUBECONFIG" --wait 5m
kind_ load docker-image "$IMG" "${WORKLOADS[@]}" --name "$CLUSTER" >/dev/null
k get nodes

step "conductor-tf installed: CRDs, RBAC and the manager pod"
"$ROOT/hack/kustomize.sh" "$IMG" >"$DIR/install.yaml"
k apply --server-side -f "$DIR/install.yaml" >/dev/null
k -n conductor-system rollout status deployment/conductor-tf-controller-manager --timeout=5m
k create namespace "$NS" >/dev/null

step "Modules published as a git repository tagged v0.1.0 and served to the cluster (stands in for $REMOTE)"
"$ROOT/hack/publish-modules.sh" "$DIR/modules.git" v0.1.0 >/dev/null
git -C "$DIR/modules.git" update-server-info
(cd "$ROOT" && go build -o "$DIR/gitserve" ./hack/gitserve)
"$DIR/gitserve" -repo "$DIR/modules.git" -listen "$(kind_gateway):0" >"$DIR/gitserve.url" &
SERVER_PID=$!
for _ in $(seq 50); do [[ -s $DIR/gitserve.url ]] && break; sleep 0.1; done
MODULES_URL=$(head -1 "$DIR/gitserve.url")
info "$MODULES_URL//modules/rook-minio?ref=v0.1.0"

step "The platform team's class: minio-standard (default for ObjectStore)"
info "runs get no credentials of the controller's: the class grants the ServiceAccount conductor-tf-module-rook-minio (config/samples/rook_minio_rbac.yaml)"
k apply -f "$ROOT/config/samples/rook_minio_rbac.yaml" >/dev/null
sed "s|$REMOTE|$MODULES_URL|" "$ROOT/config/samples/objectstore_class.yaml" | k apply -f -
k wait --for=condition=Ready infraclass/minio-standard --timeout=120s >/dev/null \
  || fail "the class did not become Ready: $(k get infraclass minio-standard -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"

step "The application team's claim: assets (8Gi of object storage) in namespace $NS"
sed "s|namespace: default|namespace: $NS|" "$ROOT/config/samples/objectstore_claim.yaml" | k apply -f -
last="" t0=$(date +%s)
while :; do
  now=$(k get infraclaim assets -n "$NS" -o jsonpath='phase={.status.phase} ready={.status.conditions[?(@.type=="Ready")].status} ({.status.conditions[?(@.type=="Ready")].reason})' 2>/dev/null || true)
  [[ $now != "$last" ]] && info "[$(( $(date +%s) - t0 ))s] claim assets: $now"
  last=$now
  [[ $now == "phase=Bound ready=True"* ]] && break
  (( $(date +%s) - t0 > TIMEOUT )) && fail "claim not Ready after ${TIMEOUT}s: $now"
  sleep 2
done
RES=$(k get infraclaim assets -n "$NS" -o jsonpath='{.status.resourceName}')
STORE=minio-$RES # the sample names the store after the resource

step "kubectl get conductor -A"
k get conductor -A

step "What the module runs (namespace $STORE): the MinIO server, its volume, the bucket's Job"
k get deploy,pods,svc,pvc,jobs -n "$STORE"

step "The claim's connection Secret assets-s3"
k get secret assets-s3 -n "$NS" -o go-template='{{range $k, $v := .data}}{{printf "    %s\n" $k}}{{end}}'
info "endpoint = $(k get secret assets-s3 -n "$NS" -o jsonpath='{.data.endpoint}' | base64 -d)"
info "bucket   = $(k get secret assets-s3 -n "$NS" -o jsonpath='{.data.bucket}' | base64 -d)"

step "An application pod that mounts only assets-s3 writes, lists and reads back an object"
k apply -n "$NS" -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: s3-roundtrip}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, runAsUser: 65534, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: s3client
    image: ${WORKLOADS[1]}
    args: [roundtrip, --secret-dir, /conn, hello.txt, "hello from a claim"]
    volumeMounts: [{name: conn, mountPath: /conn, readOnly: true}]
    securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
  volumes: [{name: conn, secret: {secretName: assets-s3}}]
POD
k wait -n "$NS" pod/s3-roundtrip --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s >/dev/null \
  || fail "the S3 round trip failed: $(k logs -n "$NS" s3-roundtrip 2>&1 | tail -3)"
k logs -n "$NS" s3-roundtrip | sed 's/^/    /'
k delete pod -n "$NS" s3-roundtrip --wait=false >/dev/null

step "Deleting the claim: reclaim policy Delete destroys the server, its volume and the Secret, then the state"
k delete infraclaim assets -n "$NS" --wait=false
k wait --for=delete "infraresource/$RES" --timeout="${TIMEOUT}s" >/dev/null || fail "resource $RES still exists after ${TIMEOUT}s"
k wait --for=delete "namespace/$STORE" --timeout=180s >/dev/null || fail "namespace $STORE still exists"
info "infraresource $RES: $(k get infraresource "$RES" 2>&1 | tail -1)"
info "namespace $STORE: $(k get namespace "$STORE" 2>&1 | tail -1)"
info "volumes: $(k get pv 2>&1 | tail -1)"
info "connection Secret: $(k get secret assets-s3 -n "$NS" 2>&1 | tail -1)"
info "state Secrets: $(k get secret -n conductor-system -l "conductor.io/resource=$RES" 2>&1 | tail -1)"
