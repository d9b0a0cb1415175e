#!/usr/bin/env bash
# The dashboard's picture in docs/monitoring.md (docs/images/dashboard.png), from a running manager.
#
# Grafana cannot be built on a machine without npm (its frontend), so a real Prometheus (Debian's
# prometheus package) scrapes a manager that provisions, holds and reclaims claims on a local
# control plane, and hack/dashboard-plot.py runs every panel's query of
# config/monitoring/dashboard.json against it and draws the panels in the dashboard's layout
# (Debian's python3-matplotlib, run by /usr/bin/python3: a python3 of its own on PATH lacks it). Both packages are installed with apt-get when missing.
#
#   hack/dashboard-screenshot.sh            # MINUTES=8: how long the claims come and go
#
# Its own control plane (ports 17543/13479/13480), manager metrics on 127.0.0.1:18080, Prometheus
# on 127.0.0.1:19090; everything is stopped at the end. Exit 0 when the picture is written.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
DIR=$CACHE/dashboard
export CLUSTER_DIR=$DIR/cluster APISERVER_PORT=17543 ETCD_PORT=13479 ETCD_PEER_PORT=13480
MINUTES=${MINUTES:-8}
OUT=${OUT:-$ROOT/docs/images/dashboard.png}
log() { printf '[dashboard] %s\n' "$*" >&2; }

if ! command -v prometheus >/dev/null || ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  log "installing prometheus and python3-matplotlib (Debian)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus python3-matplotlib >/dev/null
fi
"$ROOT/hack/tools.sh" all >/dev/null
set -a; eval "$("$ROOT/hack/tools.sh" env)"; set +a
k() { "$CONDUCTOR_TF_K8S_BIN/kubectl" "$@"; }

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$ROOT/hack/cluster.sh" down >/dev/null 2>&1 || true
}
trap cleanup EXIT
rm -rf "$DIR" && mkdir -p "$DIR"
"$ROOT/hack/cluster.sh" up
export KUBECONFIG=$CLUSTER_DIR/kubeconfig
k apply --server-side -f "$ROOT/config/crd/bases" >/dev/null
k wait --for=condition=Established crd --all --timeout=60s >/dev/null
for ns in conductor-system team-a team-b team-c; do k create namespace "$ns" >/dev/null; done

(cd "$ROOT" && go build -o "$DIR/conductor-tf" ./cmd/conductor-tf)
"$DIR/conductor-tf" --terraform-path "$CONDUCTOR_TF_TOFU" --work-dir "$DIR/work" --namespace conductor-system \
  --health-probe-bind-address 0 --metrics-bind-address 127.0.0.1:18080 --metrics-secure=false \
  --max-concurrent-runs 2 --sync-interval 3m >"$DIR/manager.log" 2>&1 &
PIDS+=($!)
cat >"$DIR/prometheus.yml" <<YAML
global: {scrape_interval: 5s, evaluation_interval: 5s}
rule_files: [$ROOT/config/monitoring/alerts.yaml]
scrape_configs:
- job_name: conductor-tf
  static_configs: [{targets: ["127.0.0.1:18080"]}]
YAML
prometheus --config.file "$DIR/prometheus.yml" --storage.tsdb.path "$DIR/prometheus" \
  --web.listen-address 127.0.0.1:19090 >"$DIR/prometheus.log" 2>&1 &
PIDS+=($!)

MODULE=$ROOT/internal/tfrunner/testdata/modules/one
class() { # class NAME DEFAULT APPROVAL
  k apply -f - >/dev/null <<YAML
apiVersion: conductor.io/v1alpha1
kind: InfraClass
metadata: {name: $1}
spec:
  resourceKind: Pet
  default: $2
  approval: $3
  reclaimPolicy: Delete
  module: {source: $MODULE, version: v1}
  variables: {prefix: "\${claim.name}"}
YAML
}
claim() { # claim NAMESPACE NAME [CLASS]
  k apply -f - >/dev/null <<YAML
apiVersion: conductor.io/v1alpha1
kind: InfraClaim
metadata: {name: $2, namespace: $1}
spec:
  resourceKind: Pet
  ${3:+className: $3}
  resources: {requests: {storage: 1Gi}}
  writeConnectionSecretToRef: {name: $2-conn}
YAML
}
class pets true Automatic
class pets-reviewed false Manual
log "claims come and go for $MINUTES minutes (manager log $DIR/manager.log)"
end=$(( $(date +%s) + MINUTES * 60 )) i=0
while (( $(date +%s) < end )); do
  for ns in team-a team-b team-c; do claim "$ns" "pet-$i"; done
  (( i % 4 == 0 )) && claim team-b "reviewed-$i" pets-reviewed
  (( i >= 6 && i % 3 == 0 )) && k delete infraclaim -n team-a "pet-$(( i - 6 ))" --wait=false >/dev/null
  i=$(( i + 1 ))
  sleep 20
done
mkdir -p "$(dirname "$OUT")"
/usr/bin/python3 "$ROOT/hack/dashboard-plot.py" http://127.0.0.1:19090 "$ROOT/config/monitoring/dashboard.json" "$OUT" "${MINUTES}m"
log "wrote $OUT"
