#!/usr/bin/env bash
# Builds conductor-tf's real parts from the Go module proxy into a cache outside the repository.
#
#   hack/tools.sh [all|k8s|tofu|providers|cloud-providers|controller-gen|proto|kind|minio|cloud-providers-built|aws-provider|aws-provider-built|env]
#
# `proto` (make generate-proto, and make test's verify-proto) builds buf, protoc-gen-go and
# protoc-gen-go-grpc: buf compiles the .proto files itself (no protoc) and runs the two plugins as
# local binaries, offline.
#
# `kind` (for make kind-node-image and make test-e2e only) builds the kind CLI and a node's parts:
# kubelet, kubeadm, kube-scheduler, kube-proxy, CoreDNS and local-path-provisioner.
#
# `minio` (for make workload-images) builds the MinIO server that the rook-minio module runs.
#
# `aws-provider` builds the aws provider alone (make test-e2e's workload identity spec runs only
# where it is built; `cloud-providers` builds it with google for make test-modules).
#
# Everything is version-pinned below, idempotent (a stamp file per part) and reused between runs.
# Nothing is downloaded from anywhere but the Go module proxy.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.1}
TOFU_VERSION=${TOFU_VERSION:-v1.12.6}
CONTROLLER_TOOLS_VERSION=${CONTROLLER_TOOLS_VERSION:-v0.23.0}
# kind v0.31 writes kubeadm.k8s.io/v1beta3, which kubeadm 1.37 no longer reads, and the module proxy
# serves no v0.31: v0.33.0 is the nearest that creates a v1.37 cluster.
KIND_VERSION=${KIND_VERSION:-v0.33.0}
# The CoreDNS release kubeadm v1.37 names (cmd/kubeadm/app/constants: CoreDNSVersion).
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.6}
# Helm, to lint and render dist/chart (make test) and install it (make test-e2e). v3.22.0 builds
# against k8s.io v0.37, as the project does.
HELM_VERSION=${HELM_VERSION:-v3.22.0}
# The run protocol's code generators (proto/, internal/runners/runnerpb). protoc-gen-go v1.36.12's
# generator is the same code as the google.golang.org/protobuf pseudo-version go.mod requires (a
# commit before v1.36.12; only the version it stamps into the generated files differs).
# protoc-gen-go-grpc v1.6.2 is the newest the module proxy serves; its code needs grpc ≥ v1.64.
BUF_VERSION=${BUF_VERSION:-v1.75.0}
PROTOC_GEN_GO_VERSION=${PROTOC_GEN_GO_VERSION:-v1.36.12}
PROTOC_GEN_GO_GRPC_VERSION=${PROTOC_GEN_GO_GRPC_VERSION:-v1.6.2}
# Provider plugins: <name> <module path> <pseudo-version of a commit> <version the mirror publishes it as>.
# Their v2+/v3 tags lack the /vN module path, so a commit is pinned by its pseudo-version; the
# version is the newest release in that commit's CHANGELOG. hashicorp/null is not here: the module
# proxy this project can reach holds no version of terraform-provider-null newer than v1.0.0 (2017,
# plugin protocol 4, which no current Terraform or OpenTofu loads), and no module uses it.
PROVIDERS=(
  "random github.com/terraform-providers/terraform-provider-random v1.3.2-0.20260824155315-e1092b0cfc07 3.9.0"
  "local github.com/terraform-providers/terraform-provider-local v1.4.1-0.20260513075820-3561e410f9fe 2.9.0"
  "kubernetes github.com/hashicorp/terraform-provider-kubernetes v1.13.4-0.20260821094251-3a33fb6cc605 3.2.1"
)

# What the rook-minio module's pods run (`minio`, for hack/workload-images.sh), and what a kind node
# needs for volumes (part of `kind`): the MinIO server at a commit (MinIO publishes no module versions; this
# pseudo-version is the newest commit the module proxy serves), and Rancher's local-path-provisioner,
# the dynamic provisioner kind's own node images ship. kind v0.33 ships v0.0.37, which the proxy
# serves but the checksum database does not know (v0.0.31 to v0.0.37: "404 Not Found" from
# sum.golang.org); v0.0.30 is the newest that verifies.
MINIO_VERSION=${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}
LOCAL_PATH_VERSION=${LOCAL_PATH_VERSION:-v0.0.30}

# The emulator make test-modules applies gcs-bucket against (with `cloud-providers`): Google Cloud
# Storage's JSON API, in Go.
FAKE_GCS_VERSION=${FAKE_GCS_VERSION:-v1.56.1}

# Cloud providers, only for `make validate-modules` and `make test-modules` (large builds): <name> <module path> <pseudo-version>;
# the version they are published as is the newest release in the commit's CHANGELOG.
CLOUD_PROVIDERS=(
  "aws github.com/hashicorp/terraform-provider-aws v1.60.1-0.20260602190131-5f2286d6d836"
  "google github.com/hashicorp/terraform-provider-google v1.20.1-0.20260828184646-f3721fb45fa3"
)

CACHE=${CONDUCTOR_TF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/conductor-tf}
GOOS=$(go env GOOS); GOARCH=$(go env GOARCH)
K8S_BIN=$CACHE/k8s/$KUBE_VERSION/bin
TOFU_BIN=$CACHE/tofu/$TOFU_VERSION/bin
MIRROR=$CACHE/providers/mirror
CLI_CONFIG=$CACHE/providers/terraform.rc
CONTROLLER_GEN=$CACHE/bin/controller-gen-$CONTROLLER_TOOLS_VERSION
KIND=$CACHE/bin/kind-$KIND_VERSION
HELM=$CACHE/bin/helm-$HELM_VERSION
# buf finds the plugins by name on PATH (proto/buf.gen.yaml): they share one directory.
PROTO_BIN=$CACHE/proto/bin
WORKLOAD_BIN=$CACHE/workloads/bin
NODE_BIN=$CACHE/k8s/$KUBE_VERSION/node-bin
export GOFLAGS=-mod=mod

log() { printf '[tools] %s\n' "$*" >&2; }

# fresh STAMP RECIPE: the part was built by this very recipe (version and build flags), so it is reused.
fresh() { [[ -f $1 && "$(cat "$1")" == "$2" ]]; }

# wrapper_module DIR MODULE_PATH: start a throwaway module in DIR that only requires what it builds.
wrapper_module() {
  rm -rf "$1"; mkdir -p "$1"
  printf 'module %s\n\ngo %s\n' "$2" "$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')" >"$1/go.mod"
}

# upstream_gomod MODULE@VERSION: path of the module's go.mod in the module cache.
upstream_gomod() {
  local out; out=$(go mod download -json "$1")
  if grep -q '"Error"' <<<"$out"; then log "cannot fetch $1 from the module proxy: $out"; return 1; fi
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$out"
}

# k8s_module DIR NAME: a wrapper module NAME in DIR that requires k8s.io/kubernetes@$KUBE_VERSION and
# repeats its replace directives (./staging/src/k8s.io/X becomes k8s.io/X at the matching v0
# version); prints the path of upstream's go.mod.
k8s_module() {
  wrapper_module "$1" "$2"
  local gomod staging="v0.${KUBE_VERSION#v1.}"
  gomod=$(cd "$1" && upstream_gomod "k8s.io/kubernetes@$KUBE_VERSION")
  ( cd "$1"
    go mod edit -require="k8s.io/kubernetes@$KUBE_VERSION"
    sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/k8s.io/.*#\1#p' "$gomod" | while read -r m; do
      go mod edit -replace="$m=$m@$staging"
    done
  )
  echo "$gomod"
}

# k8s_ldflags: the version stamps Kubernetes' own builds carry (what --version and kubeadm read).
k8s_ldflags() {
  local minor=${KUBE_VERSION#v1.} date p ld="-s -w"
  date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$KUBE_VERSION -X $p.gitMajor=1 -X $p.gitMinor=${minor%%.*}"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$date"
  done
  echo "$ld"
}

build_k8s() {
  local stamp=$K8S_BIN/.stamp recipe="k8s $KUBE_VERSION ldflags-v1"
  fresh "$stamp" "$recipe" && return 0
  log "building etcd, kube-apiserver, kube-controller-manager, kubectl $KUBE_VERSION (a few minutes, once)"
  local dir=$CACHE/build/k8s-$KUBE_VERSION gomod
  gomod=$(k8s_module "$dir" conductor-tf.local/k8s-tools)
  ( cd "$dir"
    # etcd at the version Kubernetes itself requires.
    local etcd; etcd=$(sed -n 's#^[[:space:]]*go.etcd.io/etcd/server/v3 \(v[^ ]*\).*#\1#p' "$gomod")
    go mod edit -require="go.etcd.io/etcd/server/v3@$etcd"
    cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
    go mod tidy
    mkdir -p "$K8S_BIN"
    CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags)" -o "$K8S_BIN/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$K8S_BIN/etcd" go.etcd.io/etcd/server/v3
  )
  "$K8S_BIN/kube-apiserver" --version >&2
  echo "$recipe" >"$stamp"
}

# build_k8s_node: the binaries of a kind node that the control plane for tests does not need.
build_k8s_node() {
  local stamp=$NODE_BIN/.stamp recipe="k8s-node $KUBE_VERSION coredns $COREDNS_VERSION ldflags-v1"
  fresh "$stamp" "$recipe" && return 0
  log "building kubelet, kubeadm, kube-scheduler, kube-proxy $KUBE_VERSION and CoreDNS $COREDNS_VERSION (several minutes, once)"
  local dir=$CACHE/build/k8s-node-$KUBE_VERSION
  k8s_module "$dir" conductor-tf.local/k8s-node >/dev/null
  ( cd "$dir"
    cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
    go mod tidy
    mkdir -p "$NODE_BIN"
    CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags)" -o "$NODE_BIN/" \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubeadm \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
  )
  local tmp; tmp=$(mktemp -d)
  CGO_ENABLED=0 GOBIN=$tmp go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
  mv "$tmp/coredns" "$NODE_BIN/coredns"; rmdir "$tmp"
  "$NODE_BIN/kubeadm" version -o short >&2
  echo "$recipe" >"$stamp"
}

build_kind() {
  [[ -x $KIND ]] && return 0
  log "building kind $KIND_VERSION"
  mkdir -p "$(dirname "$KIND")"
  local tmp; tmp=$(mktemp -d)
  CGO_ENABLED=0 GOBIN=$tmp go install "sigs.k8s.io/kind@$KIND_VERSION"
  mv "$tmp/kind" "$KIND"; rmdir "$tmp"
}

build_tofu() {
  local stamp=$TOFU_BIN/.stamp recipe="tofu $TOFU_VERSION dev=no"
  fresh "$stamp" "$recipe" && return 0
  log "building OpenTofu $TOFU_VERSION (about 5 minutes, once)"
  local dir=$CACHE/build/tofu-$TOFU_VERSION
  wrapper_module "$dir" conductor-tf.local/tofu
  ( cd "$dir"
    go mod edit -require="github.com/opentofu/opentofu@$TOFU_VERSION"
    local gomod; gomod=$(upstream_gomod "github.com/opentofu/opentofu@$TOFU_VERSION")
    # Repeat the upstream replace directives (OpenTofu's fork of hcl/v2).
    sed -n 's#^replace[[:space:]]\{1,\}\([^ ]*\) [^ ]* => \([^ ]*\) \([^ ]*\)$#\1=\2@\3#p' "$gomod" | while read -r r; do
      go mod edit -replace="$r"
    done
    printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/opentofu/opentofu/cmd/tofu"\n' >tools.go
    go mod tidy
    mkdir -p "$TOFU_BIN"
    # dev=no makes it a release build: "1.12.6", not "1.12.6-dev", which version constraints reject.
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" \
      -o "$TOFU_BIN/tofu" github.com/opentofu/opentofu/cmd/tofu
  )
  TF_CLI_CONFIG_FILE=/dev/null "$TOFU_BIN/tofu" version >&2
  echo "$recipe" >"$stamp"
}

build_providers() {
  local entry name mod pseudo ver
  for entry in "${PROVIDERS[@]}"; do
    read -r name mod pseudo ver <<<"$entry"
    build_provider "$name" "$mod" "$pseudo" "$ver"
  done
  link_opentofu_mirror
  cat >"$CLI_CONFIG.tmp" <<RC
# Generated by hack/tools.sh: terraform/tofu init installs providers only from the local mirror.
provider_installation {
  filesystem_mirror {
    path    = "$MIRROR"
    include = ["registry.terraform.io/*/*", "registry.opentofu.org/*/*"]
  }
}
RC
  mv "$CLI_CONFIG.tmp" "$CLI_CONFIG"
}

# build_provider NAME MODULE PSEUDO VERSION: build one provider plugin into the mirror.
build_provider() {
  local name=$1 mod=$2 pseudo=$3 ver=$4
  local dest=$MIRROR/registry.terraform.io/hashicorp/$name/$ver/${GOOS}_$GOARCH
  local bin=$dest/terraform-provider-${name}_v$ver
  [[ -x $bin ]] && return 0
  log "building provider hashicorp/$name $ver ($mod@$pseudo)"
  local dir=$CACHE/build/provider-$name
  wrapper_module "$dir" "conductor-tf.local/provider-$name"
  ( cd "$dir"
    go mod edit -require="$mod@$pseudo"
    printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$mod" >tools.go
    go mod tidy
    mkdir -p "$dest"
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" "$mod"
    mv "$bin.tmp" "$bin"
  )
}

# link_opentofu_mirror: OpenTofu resolves hashicorp/* to registry.opentofu.org; both hostnames
# serve the same plugins, hard-linked (OpenTofu does not follow a symlinked host directory).
link_opentofu_mirror() {
  rm -f "$MIRROR/registry.opentofu.org" 2>/dev/null || true
  (cd "$MIRROR/registry.terraform.io" && find . -type f -name 'terraform-provider-*' | while read -r f; do
    mkdir -p "$MIRROR/registry.opentofu.org/$(dirname "$f")"
    ln -f "$f" "$MIRROR/registry.opentofu.org/$f"
  done)
}

build_cloud_providers() {
  local entry
  for entry in "${CLOUD_PROVIDERS[@]}"; do
    build_cloud_provider "${entry%% *}"
  done
  link_opentofu_mirror
}

# build_cloud_provider NAME: the provider NAME of CLOUD_PROVIDERS, published as the newest release
# in its commit's CHANGELOG.
build_cloud_provider() {
  local entry name mod pseudo ver
  for entry in "${CLOUD_PROVIDERS[@]}"; do
    read -r name mod pseudo <<<"$entry"
    [[ $name == "$1" ]] || continue
    local src; src=$(go mod download -json "$mod@$pseudo" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    ver=$(sed -n 's/^## \([0-9][0-9.]*\).*/\1/p' "$src/CHANGELOG.md" | head -1)
    [[ -n $ver ]] || { log "no release heading in $mod's CHANGELOG"; return 1; }
    build_provider "$name" "$mod" "$pseudo" "$ver"
  done
}

# build_aws_provider: only the aws provider (the e2e suite's workload identity spec applies a bucket
# with it through MinIO's STS; about 30 minutes cold on one core). It builds under a lock of its
# own, so that a make test beside it does not wait for it.
build_aws_provider() { build_cloud_provider aws; }

# aws_provider_built: exit 0 when the aws provider is in the mirror.
aws_provider_built() {
  compgen -G "$MIRROR/registry.terraform.io/hashicorp/aws/*/${GOOS}_$GOARCH/terraform-provider-aws_v*" >/dev/null
}

# cloud_providers_built: exit 0 when `cloud-providers` has built everything it builds (.ci/run runs
# make test-modules only then: google and aws took 52 minutes here, cold, on 2 cores).
cloud_providers_built() {
  local entry name
  for entry in "${CLOUD_PROVIDERS[@]}"; do
    read -r name _ <<<"$entry"
    compgen -G "$MIRROR/registry.terraform.io/hashicorp/$name/*/${GOOS}_$GOARCH/terraform-provider-${name}_v*" >/dev/null || return 1
  done
  [[ -x $WORKLOAD_BIN/fake-gcs-server ]]
}

build_helm() {
  [[ -x $HELM ]] && return 0
  log "building helm $HELM_VERSION"
  mkdir -p "$(dirname "$HELM")"
  local tmp; tmp=$(mktemp -d)
  CGO_ENABLED=0 GOBIN=$tmp go install -trimpath -ldflags "-s -w" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$tmp/helm" "$HELM"; rmdir "$tmp"
}

build_controller_gen() {
  [[ -x $CONTROLLER_GEN ]] && return 0
  log "building controller-gen $CONTROLLER_TOOLS_VERSION"
  mkdir -p "$(dirname "$CONTROLLER_GEN")"
  local tmp; tmp=$(mktemp -d)
  GOBIN=$tmp go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_TOOLS_VERSION"
  mv "$tmp/controller-gen" "$CONTROLLER_GEN"; rmdir "$tmp"
}

# build_proto: buf and the Go plugins into $PROTO_BIN, each rebuilt only when its version changes.
build_proto() {
  proto_tool buf github.com/bufbuild/buf/cmd/buf "$BUF_VERSION"
  proto_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$PROTOC_GEN_GO_VERSION"
  proto_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"
}

# proto_tool NAME PACKAGE VERSION: go install PACKAGE@VERSION as $PROTO_BIN/NAME (stamp .NAME.stamp).
proto_tool() {
  local name=$1 pkg=$2 ver=$3
  local stamp=$PROTO_BIN/.$name.stamp recipe="$pkg@$ver cgo=0 trimpath"
  [[ -x $PROTO_BIN/$name ]] && fresh "$stamp" "$recipe" && return 0
  log "building $name $ver"
  mkdir -p "$PROTO_BIN"
  local tmp; tmp=$(mktemp -d)
  CGO_ENABLED=0 GOBIN=$tmp go install -trimpath -ldflags "-s -w" "$pkg@$ver"
  mv "$tmp/$name" "$PROTO_BIN/$name"; rmdir "$tmp"
  echo "$recipe" >"$stamp"
}

# build_minio: the MinIO server, a static linux binary (hack/workload-images.sh puts it in an image).
build_minio() { workload_tool minio github.com/minio/minio "$MINIO_VERSION"; }

# build_fake_gcs: fake-gcs-server, for make test-modules.
build_fake_gcs() { workload_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION"; }

# build_local_path: local-path-provisioner, a static linux binary (the kind node image's storage).
build_local_path() { workload_tool local-path-provisioner github.com/rancher/local-path-provisioner "$LOCAL_PATH_VERSION"; }

workload_tool() {
  local name=$1 pkg=$2 ver=$3
  local stamp=$WORKLOAD_BIN/.$name.stamp recipe="$pkg@$ver cgo=0 trimpath linux/$GOARCH"
  [[ -x $WORKLOAD_BIN/$name ]] && fresh "$stamp" "$recipe" && return 0
  log "building $name $ver (MinIO: about 10 minutes, once)"
  mkdir -p "$WORKLOAD_BIN"
  local tmp; tmp=$(mktemp -d)
  CGO_ENABLED=0 GOOS=linux GOBIN=$tmp go install -trimpath -ldflags "-s -w" "$pkg@$ver"
  mv "$tmp/$name" "$WORKLOAD_BIN/$name"; rmdir "$tmp"
  echo "$recipe" >"$stamp"
}

# print_env: the variables the Makefile and tests use to find the parts.
print_env() {
  cat <<ENV
KUBEBUILDER_ASSETS=$K8S_BIN
CONDUCTOR_TF_K8S_BIN=$K8S_BIN
CONDUCTOR_TF_TOFU=$TOFU_BIN/tofu
TF_CLI_CONFIG_FILE=$CLI_CONFIG
CONDUCTOR_TF_PROVIDER_MIRROR=$MIRROR
CONTROLLER_GEN=$CONTROLLER_GEN
BUF=$PROTO_BIN/buf
PROTOC_GEN_GO=$PROTO_BIN/protoc-gen-go
PROTOC_GEN_GO_GRPC=$PROTO_BIN/protoc-gen-go-grpc
CONDUCTOR_TF_KIND=$KIND
CONDUCTOR_TF_HELM=$HELM
CONDUCTOR_TF_NODE_BIN=$NODE_BIN
CONDUCTOR_TF_WORKLOAD_BIN=$WORKLOAD_BIN
CONDUCTOR_TF_CLOUD_PROVIDERS="$(for e in "${CLOUD_PROVIDERS[@]}"; do printf '%s ' "${e%% *}"; done)"
ENV
}

# locked PART BUILD...: runs the builds holding $CACHE/locks/PART.lock (flock), so that two runs of
# this script at once (CI builds the images with hack/prepare-images.sh beside make test) wait for
# each other on a part they share, and the second finds it built (each build checks its stamp
# inside the lock), instead of both writing one build directory.
locked() {
  local part=$1; shift
  mkdir -p "$CACHE/locks"
  (
    flock 9
    for build in "$@"; do "$build"; done
  ) 9>"$CACHE/locks/$part.lock"
}

case "${1:-all}" in
  all) locked controller-gen build_controller_gen; locked k8s build_k8s; locked tofu build_tofu
       locked providers build_providers; locked helm build_helm ;;
  k8s) locked k8s build_k8s ;;
  tofu) locked tofu build_tofu ;;
  providers) locked providers build_providers ;;
  cloud-providers) locked providers build_providers build_cloud_providers; locked fake-gcs build_fake_gcs ;;
  cloud-providers-built) cloud_providers_built ;;
  aws-provider) locked aws-provider build_aws_provider; locked providers link_opentofu_mirror ;;
  aws-provider-built) aws_provider_built ;;
  controller-gen) locked controller-gen build_controller_gen ;;
  proto) locked proto build_proto ;;
  helm) locked helm build_helm ;;
  kind) locked k8s build_k8s; locked k8s-node build_k8s_node; locked kind build_kind; locked local-path build_local_path ;;
  minio) locked minio build_minio ;;
  env) print_env ;;
  *) echo "usage: $0 [all|k8s|tofu|providers|cloud-providers|controller-gen|proto|helm|kind|minio|cloud-providers-built|aws-provider|aws-provider-built|env]" >&2; exit 2 ;;
esac
