#!/usr/bin/env bash
# The local control plane: etcd + kube-apiserver + kube-controller-manager on loopback, built by
# hack/tools.sh, with generated certificates and RBAC authorization.
#
#   hack/cluster.sh up      start it; writes the admin kubeconfig to $CLUSTER_DIR/kubeconfig
#   hack/cluster.sh down    stop it and remove its data
#   hack/cluster.sh status  say whether it runs
#
# CLUSTER_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf/cluster. Ports (loopback only):
# API server 127.0.0.1:${APISERVER_PORT:-16443}, etcd ${ETCD_PORT:-12379}/${ETCD_PEER_PORT:-12380}.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
CLUSTER_DIR=${CLUSTER_DIR:-$CACHE/cluster}
APISERVER_PORT=${APISERVER_PORT:-16443}
ETCD_PORT=${ETCD_PORT:-12379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-12380}
KUBECONFIG_OUT=$CLUSTER_DIR/kubeconfig
PKI=$CLUSTER_DIR/pki

log() { printf '[cluster] %s\n' "$*" >&2; }
STARTING=0
die() {
  log "error: $*"
  if (( STARTING )); then log "stopping what this run started"; stop_all; fi
  exit 1
}

running() { # running NAME: the process recorded in NAME.pid is alive
  [[ -f $CLUSTER_DIR/$1.pid ]] && kill -0 "$(cat "$CLUSTER_DIR/$1.pid")" 2>/dev/null
}

start() { # start NAME CMD...: run in its own session, log to NAME.log, record NAME.pid
  local name=$1; shift
  setsid "$@" >"$CLUSTER_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$CLUSTER_DIR/$name.pid"
}

kubeconfig() { # kubeconfig FILE USER: a kubeconfig for a client certificate of the PKI
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: conductor-local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: $2
  user:
    client-certificate: $PKI/$2.crt
    client-key: $PKI/$2.key
contexts:
- name: conductor-local
  context: {cluster: conductor-local, user: $2}
current-context: conductor-local
KC
}

wait_ready() { # wait_ready NAME LOG CHECK...: poll CHECK until it succeeds, or fail showing LOG
  local name=$1 logf=$2; shift 2
  for _ in $(seq 1 120); do
    "$@" >/dev/null 2>&1 && return 0
    running "$name" || { tail -30 "$logf" >&2; die "$name exited; its log is $logf"; }
    sleep 0.5
  done
  tail -30 "$logf" >&2; die "$name not ready after 60s; its log is $logf"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

up() {
  if running kube-apiserver; then
    log "a local control plane is already running (kubeconfig: $KUBECONFIG_OUT); 'make cluster-down' stops it"
    return 0
  fi
  if running etcd || running kube-controller-manager; then
    die "a local control plane is partly running (see $CLUSTER_DIR/*.log); run 'make cluster-down' first"
  fi
  for p in "$APISERVER_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT"; do
    port_free "$p" || die "port $p on 127.0.0.1 is in use by another program; set APISERVER_PORT/ETCD_PORT/ETCD_PEER_PORT"
  done
  "$ROOT/hack/tools.sh" k8s
  eval "$("$ROOT/hack/tools.sh" env | grep '^CONDUCTOR_TF_K8S_BIN=')"
  local bin=$CONDUCTOR_TF_K8S_BIN
  mkdir -p "$CLUSTER_DIR"
  STARTING=1
  (cd "$ROOT" && go run ./hack/pki -dir "$PKI")
  kubeconfig "$KUBECONFIG_OUT" admin
  kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" controller-manager

  log "starting etcd on 127.0.0.1:$ETCD_PORT"
  start etcd "$bin/etcd" --data-dir "$CLUSTER_DIR/etcd" --name local \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "local=http://127.0.0.1:$ETCD_PEER_PORT" --unsafe-no-fsync
  wait_ready etcd "$CLUSTER_DIR/etcd.log" curl_health "http://127.0.0.1:$ETCD_PORT/health"

  log "starting kube-apiserver on https://127.0.0.1:$APISERVER_PORT"
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" --authorization-mode RBAC \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.0.0.0/24 \
    --allow-privileged=true --endpoint-reconciler-type none
  wait_ready kube-apiserver "$CLUSTER_DIR/kube-apiserver.log" \
    "$bin/kubectl" --kubeconfig "$KUBECONFIG_OUT" get --raw /readyz

  log "starting kube-controller-manager (garbage collector, namespace controller, …)"
  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$CLUSTER_DIR/controller-manager.kubeconfig" --secure-port 0 --leader-elect=false \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --use-service-account-credentials=true --cluster-name conductor-local
  wait_ready kube-controller-manager "$CLUSTER_DIR/kube-controller-manager.log" \
    "$bin/kubectl" --kubeconfig "$KUBECONFIG_OUT" get serviceaccount default -n default

  STARTING=0
  log "ready: $("$bin/kubectl" --kubeconfig "$KUBECONFIG_OUT" version 2>/dev/null | grep -i server)"
  log "kubeconfig: $KUBECONFIG_OUT   (export KUBECONFIG=$KUBECONFIG_OUT)"
}

# curl_health URL: a GET with bash only (no curl needed) that succeeds on a 200 answer.
curl_health() (
  local hostport=${1#http://}; hostport=${hostport%%/*}
  local path=/${1#http://*/}
  exec 3<>"/dev/tcp/${hostport%:*}/${hostport#*:}" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hostport" >&3
  local status; read -r _ status _ <&3; exec 3<&-
  [[ $status == 200 ]]
)

stop_all() {
  local name pid
  for name in kube-controller-manager kube-apiserver etcd; do
    if running "$name"; then
      pid=$(cat "$CLUSTER_DIR/$name.pid")
      log "stopping $name ($pid)"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}

down() {
  stop_all
  rm -rf "$CLUSTER_DIR"
  log "stopped; removed $CLUSTER_DIR"
}

status() {
  if running kube-apiserver; then log "running; kubeconfig: $KUBECONFIG_OUT"; else log "not running"; return 1; fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
