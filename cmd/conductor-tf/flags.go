package main

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// The command's flags are defined here, by functions a flag set is given to: main parses them, and
// the flags page (docs/reference/flags.md) is made from the same sets, walked with VisitAll
// (flagspage_test.go), so what the page says is what the binary defines.

// machine is what a flag's default may come from besides constants: the process's environment, its
// host name, its temporary directory and its number of CPUs. thisMachine reads the process's; the
// flags page's test builds the sets on two made-up machines, and a default that differs between
// them is said in words there, never as the value of the machine that made the page.
type machine struct {
	getenv   func(string) string
	hostname string
	tempDir  string
	cpus     int
}

// thisMachine is the process's machine (os.Getenv, os.Hostname, os.TempDir, runtime.NumCPU).
func thisMachine() machine {
	h, _ := os.Hostname()
	return machine{getenv: os.Getenv, hostname: h, tempDir: os.TempDir(), cpus: runtime.NumCPU()}
}

// envOr is the environment variable name when it is set and not empty, else def.
func (m machine) envOr(name, def string) string {
	if v := m.getenv(name); v != "" {
		return v
	}
	return def
}

// loggerOptions are controller-runtime's logger options the manager binds its --zap-* flags to
// (development defaults: console encoding, debug level).
func loggerOptions() zap.Options { return zap.Options{Development: true} }

// managerFlags defines the manager's own flags on fs, each into its field of o, with defaults from
// m. controller-runtime's flags are not among them: --kubeconfig (its client configuration defines
// it on flag.CommandLine when linked) and the logger's (loggerOptions().BindFlags).
func managerFlags(fs *flag.FlagSet, o *options, m machine) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint (e.g. :8443 for HTTPS, 127.0.0.1:8080 for HTTP); 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, only to callers the API server authenticates and authorizes (get on the /metrics non-resource URL).")
	fs.BoolVar(&o.http2, "enable-http2", false, "Allow HTTP/2 on the metrics server (off: CVE-2023-44487, CVE-2023-39325).")
	fs.StringVar(&o.podName, "pod-name", m.envOr("POD_NAME", m.hostname), "Name of this controller's pod, recorded in each run it starts.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof endpoints (net/http/pprof), e.g. 127.0.0.1:6060; empty disables them. For profiling only: they are served without authentication.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles.")
	fs.IntVar(&o.workers, "max-concurrent-reconciles", 8, "Reconciles of each kind that run at once.")
	fs.IntVar(&o.resourceWorkers, "max-concurrent-resource-reconciles", 256, "Resource reconciles that run at once. Most of them wait for a runner slot, where waiting runs are served across namespaces in turn: keep it well above --max-concurrent-runs, or the work queue, first come first served, decides the order instead.")
	fs.IntVar(&o.maxRuns, "max-concurrent-runs", m.cpus, "Terraform runs that execute at once.")
	fs.StringVar(&o.terraformPath, "terraform-path", "", "The tofu or terraform binary; else tofu, then terraform, on PATH.")
	fs.StringVar(&o.installVersion, "install-terraform-version", "", "A Terraform release (e.g. 1.11.4) hc-install downloads from releases.hashicorp.com when no tofu or terraform is found; empty (the default): nothing is downloaded. Terraform from 1.6 on is under the Business Source License 1.1, OpenTofu (the image's) under MPL-2.0: see docs/install.md.")
	fs.StringVar(&o.workDir, "work-dir", filepath.Join(m.tempDir, "conductor-tf"), "Working directories of runs, the plugin cache and the module cache.")
	fs.StringVar(&o.namespace, "namespace", m.envOr("POD_NAMESPACE", "conductor-system"), "Namespace of the state Secrets and lock Leases (must exist).")
	fs.StringVar(&o.kubeconfig, "state-kubeconfig", "", "Deprecated and ignored: state goes through the controller's state server, and runs get Kubernetes credentials only from a class's kubernetesAccess.")
	fs.DurationVar(&o.syncInterval, "sync-interval", resourcecontroller.DefaultSyncInterval, "How often an unchanged resource is planned again to detect drift.")
	fs.StringVar(&o.warmProviders, "warm-providers", defaultWarmProviders, "Providers to keep running between runs, comma-separated (namespace/type, e.g. hashicorp/random), or none: applies reattach to them (TF_REATTACH_PROVIDERS) instead of starting them. A process serves one run at a time and only runs of the same class, tenant, module, provider version and environment, over a Unix socket moved, once it serves and after each run, into a new directory of 128 random bits no run may list (the name sock_diag lists leads nowhere; from Landlock ABI 9 the kernel also refuses a run's connect to any socket it is not granted, docs/tenancy.md); its package must match the lock file; it is recycled after 100 runs or 2 minutes idle and killed after a failed run; modules that declare provider aliases, and classes with warmProviders: Disabled, never use it. A warm process runs in a directory of its own, not the run's workspace: list only providers that read no files (the default lists those of HashiCorp's that read none).")
	fs.BoolVar(&o.keepRunLogs, "keep-run-logs", false, "Keep every run's log in its Secret (tflog-…); by default only failed runs, plans waiting for approval and drift found keep one, and a successful run's summary stays in status.")
	fs.DurationVar(&o.secretCheck, "secret-check-interval", resourcecontroller.DefaultSecretCheckInterval, "How often an applied resource's Secret inputs (variablesFrom, env) are read to notice a rotation, which applies it once.")
	fs.IntVar(&o.driftChecks, "max-concurrent-drift-checks", 1, "Drift checks that run at once: the share of the runner pool drift checks may take.")
	fs.DurationVar(&o.staleLockAfter, "stale-lock-after", state.DefaultStaleLockAfter, "How long a state lock held by anyone but a live run of this controller is held before status reports it as stale (kubectl conductor unlock releases only such locks).")
	fs.IntVar(&o.stateHistory, "state-history", statebackend.DefaultHistoryLimit, "Earlier versions of each state kept beside it, for restore.")
	fs.StringVar(&o.stateKeySecret, "state-encryption-secret", "", "Secret in --namespace holding the passphrase of OpenTofu's state and plan encryption (keys \"passphrase\" and, during a rotation, \"previous-passphrase\"), created with a random passphrase when it does not exist; read again every 30s. Empty: states and plans are not encrypted. Terraform runs ignore it (Terraform has no state encryption).")
	fs.StringVar(&o.stateServerAddr, "state-server-address", "127.0.0.1:0", "Loopback address the state server (Terraform's http backend, for the controller's own runs) listens on; port 0 picks one.")
	fs.StringVar(&o.runProtocolAddr, "run-protocol-address", "", "Address (e.g. :9443) of the run protocol that runner pools (InfraRunnerPool) connect to, over TLS; empty: runner pools are not served and every run stays in the manager's pool.")
	fs.StringVar(&o.runnerStateAddr, "runner-state-address", ":9444", "Address of the state server for runner pools' runs, over TLS (with --run-protocol-address).")
	fs.StringVar(&o.runnerService, "runner-service", "conductor-tf-runs", "The Service in --namespace that runners reach the manager's run protocol through (the chart sets <release>-runs); its names are signed into the manager's certificate unless --runner-hosts is given.")
	fs.StringVar(&o.runnerHosts, "runner-hosts", "", "Comma-separated names runners reach the manager by, for its serving certificate (the first is the one runner pods are given); --runner-service's names in --namespace when empty.")
	fs.StringVar(&o.runnerImage, "runner-image", m.getenv("RUNNER_IMAGE"), "Image of runner pods whose InfraRunnerPool names none (the manager's own).")
	fs.DurationVar(&o.heartbeatTimeout, "runner-heartbeat-timeout", runners.DefaultHeartbeatTimeout, "A run's lease on a runner pool: each heartbeat renews it for this long; a runner whose lease expires freezes its run, then kills it.")
	fs.DurationVar(&o.fenceGrace, "runner-fence-grace", runners.DefaultFenceGrace, "How much longer than its lease a silent run on a runner pool is waited for (its runner may resume it) before it is given up and its lock and state credentials released; a new leader leaves its predecessor's runner-pool locks alone for the lease plus this.")
	fs.StringVar(&o.serviceAccount, "service-account", m.getenv("SERVICE_ACCOUNT_NAME"), "The controller's own ServiceAccount in --namespace: a class or resource whose kubernetesAccess names it is refused (ServiceAccountForbidden), as one naming a runner pool's.")
	fs.DurationVar(&o.grace, "grace-period", tfrunner.DefaultGracePeriod, "How long a run gets to stop after SIGINT on shutdown.")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", DefaultDrainTimeout, "On SIGTERM, how long runs under way (in-process and on runner pools) go on before they are interrupted (SIGINT, then --grace-period); no run starts meanwhile and the manager stays leader. The pod's terminationGracePeriodSeconds must cover it and the grace period. Lost leadership interrupts at once.")
	fs.DurationVar(&o.queueTimeout, "runner-queue-timeout", runners.DefaultQueueTimeout, "How long a run waits for a runner of its pool before it is withdrawn (Synced False, WaitingForRunner) and queued again 30 s later: a pool with no runners holds no reconcile worker longer than this.")
	fs.StringVar(&o.runSandbox, "run-sandbox", sandboxAuto, sandboxFlagUsage)
	fs.StringVar(&o.sandboxHide, "run-sandbox-hide", "", "More paths, comma-separated, that runs cannot open (with --run-sandbox), e.g. mounted cloud credentials of the manager's own.")
	fs.StringVar(&o.sandboxRead, "run-sandbox-read", "", sandboxReadUsage)
	fs.StringVar(&o.sandboxWrite, "run-sandbox-write", "", sandboxWriteUsage)
	fs.StringVar(&o.runEnv, "run-env", "", runEnvUsage)
	fs.IntVar(&o.shardBuckets, "shard-buckets", 0, shardFlagUsage)
	fs.Float64Var(&o.apiQPS, "kube-api-qps", defaultKubeAPIQPS, kubeAPIQPSUsage)
	fs.IntVar(&o.apiBurst, "kube-api-burst", defaultKubeAPIBurst, "Requests the manager's client may send to the API server in a burst above --kube-api-qps (when it sets a limit).")
}

// runnerOptions are the flags of `conductor-tf runner` (runnerFlags).
type runnerOptions struct {
	name, pool, manager, stateURL string
	caFile, tokenFile             string
	concurrency                   int
	heartbeat, grace, drain       time.Duration
	workDir, terraformPath        string
	runSandbox                    string
	sandboxRead, sandboxWrite     string
	runEnv                        string
}

// runnerFlags is the flag set of `conductor-tf runner` ("runner", ContinueOnError) and the options
// it parses into, with defaults from m.
func runnerFlags(m machine) (*flag.FlagSet, *runnerOptions) {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	o := &runnerOptions{}
	fs.StringVar(&o.name, "name", m.envOr("POD_NAME", m.hostname), "This runner's name, recorded with the runs it is given.")
	fs.StringVar(&o.pool, "pool", m.getenv("RUNNER_POOL"), "The InfraRunnerPool this runner serves.")
	fs.StringVar(&o.manager, "manager", "", "The manager's run protocol address (host:port).")
	fs.StringVar(&o.stateURL, "state-url", "", "The manager's state server for runners (https://host:port).")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM file of the manager's CA (the ConfigMap "+runners.CAName+").")
	fs.StringVar(&o.tokenFile, "token-file", "", "Projected ServiceAccount token of audience "+runners.Audience+".")
	fs.IntVar(&o.concurrency, "concurrency", 1, "Runs this runner executes at once.")
	fs.DurationVar(&o.heartbeat, "heartbeat-interval", runners.DefaultHeartbeatInterval, "How often a run reports it is alive.")
	fs.StringVar(&o.workDir, "work-dir", filepath.Join(m.tempDir, "conductor-tf-runner"), "Working directories of runs and the plugin cache.")
	fs.StringVar(&o.terraformPath, "terraform-path", "", "The tofu or terraform binary; else tofu, then terraform, on PATH.")
	fs.DurationVar(&o.grace, "grace-period", tfrunner.DefaultGracePeriod, "How long a run gets to stop after SIGINT on shutdown.")
	fs.StringVar(&o.runSandbox, "run-sandbox", sandboxAuto, sandboxFlagUsage)
	fs.StringVar(&o.sandboxRead, "run-sandbox-read", "", sandboxReadUsage)
	fs.StringVar(&o.sandboxWrite, "run-sandbox-write", "", sandboxWriteUsage)
	fs.StringVar(&o.runEnv, "run-env", "", runEnvUsage)
	fs.DurationVar(&o.drain, "drain-timeout", DefaultDrainTimeout, "On SIGTERM, how long runs under way go on before they are interrupted (SIGINT, then --grace-period); no run is taken meanwhile. The pod's terminationGracePeriodSeconds must cover it and the grace period.")
	return fs, o
}
