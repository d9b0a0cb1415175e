# conductor-tf — kubebuilder-style targets. Every target that needs a tool builds it first
# (hack/tools.sh: pinned, cached in ${XDG_CACHE_HOME:-~/.cache}/conductor-tf, built from the Go
# module proxy only).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

TOOLS := hack/tools.sh
# Exports KUBEBUILDER_ASSETS, CONDUCTOR_TF_TOFU, TF_CLI_CONFIG_FILE, CONTROLLER_GEN, … into a recipe.
WITH_TOOLS = set -a; eval "$$($(TOOLS) env)"; set +a;
TEST_TIMEOUT ?= 60m
# The kubeconfig `make cluster-up` writes; `make install`/`run` use $KUBECONFIG when set, else this one.
CLUSTER_KUBECONFIG := $(or $(CONDUCTOR_TF_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/conductor-tf)/cluster/kubeconfig
KUBECONFIG ?= $(CLUSTER_KUBECONFIG)
export KUBECONFIG
# The controller image (make docker-build, deploy, build-installer).
IMG ?= conductor-tf/controller:dev
export IMG

##@ General
.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development
.PHONY: tools manifests generate generate-proto verify-proto docs fmt vet test test-faults bench bench-scale bench-controlplane bench-encryption bench-pool bench-graph bench-discovery
tools: ## Build every pinned tool into the cache (idempotent).
	@$(TOOLS) all

manifests: ## Generate CRDs and RBAC with controller-gen.
	@$(TOOLS) controller-gen
	@$(WITH_TOOLS) "$$CONTROLLER_GEN" rbac:roleName=manager-role crd:allowDangerousTypes=false paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	go run ./hack/crdpatch config/crd/bases/conductor.io_infraclaims.yaml

generate: ## Generate deepcopy code with controller-gen.
	@$(TOOLS) controller-gen
	@$(WITH_TOOLS) "$$CONTROLLER_GEN" object paths=./api/...

# buf (hack/tools.sh proto) compiles proto/ and runs the pinned plugins, found on PATH, offline.
BUF_GENERATE = $(WITH_TOOLS) PATH="$$(dirname "$$PROTOC_GEN_GO"):$$PATH" "$$BUF" generate proto --template proto/buf.gen.yaml

generate-proto: ## Generate the run protocol's Go code (internal/runners/runnerpb) from proto/ with buf.
	@$(TOOLS) proto
	@$(BUF_GENERATE)

verify-proto: ## Fail when internal/runners/runnerpb is not what generate-proto makes of proto/.
	@$(TOOLS) proto
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(BUF_GENERATE) --output "$$tmp"; \
	diff -r internal/runners/runnerpb "$$tmp/internal/runners/runnerpb" || \
		{ echo "internal/runners/runnerpb is out of date with proto/: run make generate-proto" >&2; exit 1; }

docs: ## Regenerate docs/reference/: conditions.md (condition and event reasons, from the code and hack/reasondoc/reasons.yaml) and flags.md (the manager's and runner's flags, from cmd/conductor-tf).
	go run ./hack/reasondoc
	go test ./cmd/conductor-tf -run '^TestFlagsPage$$' -count 1 -args -update-flags-page

fmt: ## gofmt the code.
	gofmt -l -w $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')

vet: ## go vet.
	go vet ./...

# How much make test fuzzes claim input (FuzzClaimInput) beyond its committed corpus: a count of
# executions (about 15 s here), not a duration. A duration's deadline races the coordinator's
# workers on a loaded machine and fails with "context deadline exceeded" and no failing input
# (golang/go#75804, fixed in Go 1.27; seen here on go1.26.8 during a cold CI run).
FUZZTIME ?= 100000x
test: tools manifests generate verify-proto fmt vet ## Unit tests and envtest suites against the real binaries, then a bounded fuzz of claim input and of runner results.
	$(WITH_TOOLS) go test ./... -timeout $(TEST_TIMEOUT) $(TESTFLAGS)
	go test ./internal/scheduler -run '^$$' -fuzz '^FuzzClaimInput$$' -fuzztime $(FUZZTIME)
	go test ./internal/runners -run '^$$' -fuzz '^FuzzRunnerResult$$' -fuzztime $(FUZZTIME)

FAULT_ROUNDS ?= 6
FAULT_SEED ?= 0
FAULT_ONLY ?=
test-faults: tools ## The fault suite (test/faults): three sharded replicas of the real reconcilers and state servers against a real API server through proxies the suite controls, faults drawn from a printed seed (FAULT_SEED replays one; FAULT_ONLY=a,b draws only those faults), FAULT_ROUNDS rounds, invariants checked after each.
	$(WITH_TOOLS) go test -tags faults ./test/faults -count 1 -timeout 30m -v -args -rounds=$(FAULT_ROUNDS) -seed=$(FAULT_SEED) -only=$(FAULT_ONLY)

bench: tools ## Benchmarks (figures, not pass/fail).
	$(WITH_TOOLS) go test ./... -run '^$$' -bench . -benchmem $(BENCHFLAGS)

N ?= 200
RUNNERS ?= 0
bench-scale: tools ## N claims to Ready through the controller vs a naive init && apply loop and bare apply (N=200; RUNNERS=2: on a runner pool of 2 runner processes; CPUPROFILE=f: the manager's CPU profile; WARM=0: --warm-providers=none, warm providers being the default).
	$(WITH_TOOLS) go test -tags scale ./test/scale -run TestBenchScale -count 1 -timeout 180m -v -args -n=$(N) -runners=$(RUNNERS) $(if $(CPUPROFILE),-cpuprofile=$(abspath $(CPUPROFILE))) -warm=$(if $(filter 0,$(WARM)),false,true) | grep -v '^=== RUN'


REPLICAS ?= 1
IDLE_SYNC ?= 2m
bench-controlplane: tools ## The control plane alone, NO Terraform runs (a carrier that answers every run at once): N claims to Ready (N=200; REPLICAS=3: three managers sharding the resources), API requests per claim, RSS, API-server CPU per claim, and one idle sync of all (IDLE_SYNC=2m).
	$(WITH_TOOLS) go test -tags scale ./test/scale -run TestBenchControlPlane -count 1 -timeout 240m -v -args -n=$(N) -replicas=$(REPLICAS) -idle-sync=$(IDLE_SYNC) | grep -v '^=== RUN'

bench-encryption: tools ## N claims to Ready without state encryption, then N with it (--state-encryption-secret), in one run, and their ratio (N=200).
	$(WITH_TOOLS) go test -tags scale ./test/scale -run TestBenchEncryption -count 1 -timeout 180m -v -args -n=$(N) | grep -v '^=== RUN'

CHAINS ?= 10
CHAIN_LENGTH ?= 20
bench-graph: tools ## Claims that read claims, NO Terraform runs: CHAINS chains of CHAIN_LENGTH claims to Ready beside as many claims reading nothing (API requests per edge), a new head value's propagation per edge (p50/p90), and a no-op sync of the heads (applies it starts downstream: 0).
	$(WITH_TOOLS) go test -tags scale ./test/scale -run TestBenchGraph -count 1 -timeout 60m -v -args -chains=$(CHAINS) -chain-length=$(CHAIN_LENGTH) | grep -v '^=== RUN'

DISCOVER ?= 1000
bench-discovery: tools ## A class's discovery of DISCOVER ConfigMaps made outside (DISCOVER=1000), real manager and kubernetes provider: class → every candidate an Available resource, beside the bare listing (tofu apply of the discovery module) and their ratio; a tenth deleted → Lost.
	$(WITH_TOOLS) go test -tags scale ./test/scale -run TestBenchDiscovery -count 1 -timeout 60m -v -args -discover=$(DISCOVER) | grep -v '^=== RUN'

POOL_CLAIMS ?= 10
bench-pool: tools ## A claim's creation → Ready with a class's ready pool and without, p50/p90 and their ratio, one claim at a time (POOL_CLAIMS=10 per class).
	$(WITH_TOOLS) go test -tags scale ./test/scale -run TestBenchPool -count 1 -timeout 60m -v -args -pool-claims=$(POOL_CLAIMS) | grep -v '^=== RUN'


##@ The main job
.PHONY: demo validate-modules test-modules
demo: ## From nothing to an object store you write to: on kind with a Docker Engine (a claim runs MinIO, a pod writes and reads an object through its Secret), else on a local control plane (DEMO_ON=kind|local).
	@hack/demo.sh

test-modules: ## The cloud modules through claims with the real providers: gcs-bucket applied and destroyed against fake-gcs-server, aws-rds planned (builds the aws and google providers once).
	@hack/test-modules.sh

validate-modules: ## Opt-in: build the aws and google providers and `terraform validate` every module.
	@hack/validate-modules.sh

##@ Build and run
.PHONY: build run install uninstall cluster-up cluster-down
build: generate ## Build the controller and the kubectl plugin (kubectl-conductor) into bin/
	go build -o bin/conductor-tf ./cmd/conductor-tf
	go build -o bin/kubectl-conductor ./cmd/kubectl-conductor

cluster-up: ## Start etcd + kube-apiserver + kube-controller-manager on loopback.
	@hack/cluster.sh up

cluster-down: ## Stop the local control plane and remove its data.
	@hack/cluster.sh down

install: manifests ## Apply the CRDs to the cluster of $KUBECONFIG.
	@$(TOOLS) k8s
	$(WITH_TOOLS) "$$CONDUCTOR_TF_K8S_BIN/kubectl" apply --server-side -f config/crd/bases

uninstall: ## Delete the CRDs from the cluster of $KUBECONFIG.
	$(WITH_TOOLS) "$$CONDUCTOR_TF_K8S_BIN/kubectl" delete --ignore-not-found -f config/crd/bases

run: tools manifests generate ## Run the controller against the cluster of $KUBECONFIG (metrics: plain HTTP on 127.0.0.1:8080).
	$(WITH_TOOLS) go run ./cmd/conductor-tf --terraform-path "$$CONDUCTOR_TF_TOFU" --work-dir "$${CONDUCTOR_TF_WORK_DIR:-/tmp/conductor-tf}" \
		--metrics-bind-address 127.0.0.1:8080 --metrics-secure=false $(RUN_ARGS)

##@ Deployment
.PHONY: base-image docker-build build-installer helm-chart deploy undeploy test-image kind-node-image workload-images test-e2e prepare-images
base-image: ## Make the runtime base image offline (debootstrap bookworm minbase + git, ca-certificates, openssh-client).
	@hack/base-image.sh

docker-build: manifests generate ## Build the controller image offline as IMG (PROVIDER_MIRROR=true bakes in the provider mirror; BASE_IMAGE overrides the base).
	@hack/docker-build.sh

docker-push: ## Push IMG to its registry.
	docker push $(IMG)

build-installer: manifests ## Render everything to install into dist/install.yaml, with IMG.
	@mkdir -p dist
	@hack/kustomize.sh $(IMG) > dist/install.yaml
	@echo "dist/install.yaml ($(IMG))"

helm-chart: manifests ## Regenerate the Helm chart dist/chart from config/ (hack/helmchart), then lint it with the pinned helm.
	@hack/kustomize.sh conductor-tf/controller:dev | go run ./hack/helmchart -out dist/chart
	@$(WITH_TOOLS) $(TOOLS) helm && "$$CONDUCTOR_TF_HELM" lint --strict dist/chart

deploy: manifests ## Install CRDs, RBAC and the manager with IMG into the cluster of $KUBECONFIG.
	@hack/kustomize.sh $(IMG) | $(WITH_TOOLS) "$$CONDUCTOR_TF_K8S_BIN/kubectl" apply --server-side -f -

undeploy: ## Remove what deploy installed (CRDs included: every claim, class and resource goes).
	@hack/kustomize.sh $(IMG) | $(WITH_TOOLS) "$$CONDUCTOR_TF_K8S_BIN/kubectl" delete --ignore-not-found --wait=false -f -

kind-node-image: ## Assemble the kind node image for Kubernetes v1.37.1 offline (debootstrap + binaries built from the Go module proxy).
	@hack/kind-node-image.sh

workload-images: ## Build the rook-minio module's images offline: the MinIO server and cmd/s3client (the module's defaults).
	@hack/workload-images.sh

test-e2e: ## kind cluster from the offline node image, controller image loaded, test/e2e (Ginkgo, tag e2e), cluster deleted.
	@hack/test-e2e.sh

prepare-images: ## Build every image make test-image and make test-e2e use (base, kind node, workloads, controller), cached; .ci/run runs it beside make test.
	@hack/prepare-images.sh

test-image: ## Build the image offline and drive the sample class and claim to Ready and back with it (docker run against a local control plane).
	@hack/test-image.sh
