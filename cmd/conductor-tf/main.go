// Command conductor-tf is the controller manager: it binds InfraClaims to InfraResources, provisions
// resources from InfraClasses, and runs Terraform/OpenTofu for them through a bounded pool. It is
// the only place that reads flags and the environment; everything below it takes plain values.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/sandbox"
	"github.com/conductor-tf/conductor-tf/internal/shard"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

type options struct {
	metricsAddr, probeAddr string
	pprofAddr              string
	metricsSecure, http2   bool
	podName                string
	leaderElect            bool
	workers, maxRuns       int
	resourceWorkers        int
	terraformPath, workDir string
	installVersion         string
	namespace, kubeconfig  string
	syncInterval, grace    time.Duration
	secretCheck            time.Duration
	keepRunLogs            bool
	warmProviders          string
	stateHistory           int
	stateKeySecret         string
	driftChecks            int
	staleLockAfter         time.Duration
	stateServerAddr        string
	runProtocolAddr        string
	runnerStateAddr        string
	runnerHosts            string
	runnerService          string
	runnerImage            string
	heartbeatTimeout       time.Duration
	drainTimeout           time.Duration
	fenceGrace             time.Duration
	serviceAccount         string
	runSandbox             string
	queueTimeout           time.Duration
	sandboxHide            string
	sandboxRead            string
	sandboxWrite           string
	runEnv                 string
	shardBuckets           int
	apiQPS                 float64
	apiBurst               int
}

// defaultWarmProviders are the providers kept warm unless --warm-providers says otherwise: those
// of HashiCorp's that read and write no files (a warm process's working directory is not the run's
// workspace, and it is granted none of it): random, null, time, tls and http. Providers that read
// files a run writes (kubernetes and helm read the granted kubeconfig, local and archive read paths
// relative to the workspace, the cloud providers read token files) are started with their run.
const defaultWarmProviders = "hashicorp/random,hashicorp/null,hashicorp/time,hashicorp/tls,hashicorp/http"

// DefaultDrainTimeout is how long, on SIGTERM, the manager and runners let runs under way finish
// before they interrupt them: long enough for most creates (a database instance takes minutes),
// short enough for a rollout. The manifests' terminationGracePeriodSeconds is it plus the grace
// period plus a margin (config/manager/manager.yaml, internal/controller/runnerpool/deployment.go).
const DefaultDrainTimeout = 10 * time.Minute

func main() {
	// A run's command rewritten by the sandbox starts here: it is confined, then exec'd.
	sandbox.Enter()
	if len(os.Args) > 1 && os.Args[1] == "runner" {
		if err := runnerMain(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "conductor-tf runner:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "Address of the metrics endpoint (e.g. :8443 for HTTPS, 127.0.0.1:8080 for HTTP); 0 disables it.")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, only to callers the API server authenticates and authorizes (get on the /metrics non-resource URL).")
	flag.BoolVar(&o.http2, "enable-http2", false, "Allow HTTP/2 on the metrics server (off: CVE-2023-44487, CVE-2023-39325).")
	flag.StringVar(&o.podName, "pod-name", envOr("POD_NAME", hostname()), "Name of this controller's pod, recorded in each run it starts.")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "", "Address of Go's /debug/pprof endpoints (net/http/pprof), e.g. 127.0.0.1:6060; empty disables them. For profiling only: they are served without authentication.")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles.")
	flag.IntVar(&o.workers, "max-concurrent-reconciles", 8, "Reconciles of each kind that run at once.")
	flag.IntVar(&o.resourceWorkers, "max-concurrent-resource-reconciles", 256, "Resource reconciles that run at once. Most of them wait for a runner slot, where waiting runs are served across namespaces in turn: keep it well above --max-concurrent-runs, or the work queue, first come first served, decides the order instead.")
	flag.IntVar(&o.maxRuns, "max-concurrent-runs", runtime.NumCPU(), "Terraform runs that execute at once.")
	flag.StringVar(&o.terraformPath, "terraform-path", "", "The tofu or terraform binary; else tofu, then terraform, on PATH.")
	flag.StringVar(&o.installVersion, "install-terraform-version", "", "A Terraform release (e.g. 1.11.4) hc-install downloads from releases.hashicorp.com when no tofu or terraform is found; empty (the default): nothing is downloaded. Terraform from 1.6 on is under the Business Source License 1.1, OpenTofu (the image's) under MPL-2.0: see docs/install.md.")
	flag.StringVar(&o.workDir, "work-dir", filepath.Join(os.TempDir(), "conductor-tf"), "Working directories of runs, the plugin cache and the module cache.")
	flag.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "conductor-system"), "Namespace of the state Secrets and lock Leases (must exist).")
	flag.StringVar(&o.kubeconfig, "state-kubeconfig", "", "Deprecated and ignored: state goes through the controller's state server, and runs get Kubernetes credentials only from a class's kubernetesAccess.")
	flag.DurationVar(&o.syncInterval, "sync-interval", resourcecontroller.DefaultSyncInterval, "How often an unchanged resource is planned again to detect drift.")
	flag.StringVar(&o.warmProviders, "warm-providers", defaultWarmProviders, "Providers to keep running between runs, comma-separated (namespace/type, e.g. hashicorp/random), or none: applies reattach to them (TF_REATTACH_PROVIDERS) instead of starting them. A process serves one run at a time and only runs of the same class, tenant, module, provider version and environment, over a Unix socket moved, once it serves and after each run, into a new directory of 128 random bits no run may list (the name sock_diag lists leads nowhere; from Landlock ABI 9 the kernel also refuses a run's connect to any socket it is not granted, docs/tenancy.md); its package must match the lock file; it is recycled after 100 runs or 2 minutes idle and killed after a failed run; modules that declare provider aliases, and classes with warmProviders: Disabled, never use it. A warm process runs in a directory of its own, not the run's workspace: list only providers that read no files (the default lists those of HashiCorp's that read none).")
	flag.BoolVar(&o.keepRunLogs, "keep-run-logs", false, "Keep every run's log in its Secret (tflog-…); by default only failed runs, plans waiting for approval and drift found keep one, and a successful run's summary stays in status.")
	flag.DurationVar(&o.secretCheck, "secret-check-interval", resourcecontroller.DefaultSecretCheckInterval, "How often an applied resource's Secret inputs (variablesFrom, env) are read to notice a rotation, which applies it once.")
	flag.IntVar(&o.driftChecks, "max-concurrent-drift-checks", 1, "Drift checks that run at once: the share of the runner pool drift checks may take.")
	flag.DurationVar(&o.staleLockAfter, "stale-lock-after", resourcecontroller.DefaultStaleLockAfter, "How long a state lock held by anyone but a live run of this controller is held before status reports it as stale (kubectl conductor unlock releases only such locks).")
	flag.IntVar(&o.stateHistory, "state-history", statebackend.DefaultHistoryLimit, "Earlier versions of each state kept beside it, for restore.")
	flag.StringVar(&o.stateKeySecret, "state-encryption-secret", "", "Secret in --namespace holding the passphrase of OpenTofu's state and plan encryption (keys \"passphrase\" and, during a rotation, \"previous-passphrase\"), created with a random passphrase when it does not exist; read again every 30s. Empty: states and plans are not encrypted. Terraform runs ignore it (Terraform has no state encryption).")
	flag.StringVar(&o.stateServerAddr, "state-server-address", "127.0.0.1:0", "Loopback address the state server (Terraform's http backend, for the controller's own runs) listens on; port 0 picks one.")
	flag.StringVar(&o.runProtocolAddr, "run-protocol-address", "", "Address (e.g. :9443) of the run protocol that runner pools (InfraRunnerPool) connect to, over TLS; empty: runner pools are not served and every run stays in the manager's pool.")
	flag.StringVar(&o.runnerStateAddr, "runner-state-address", ":9444", "Address of the state server for runner pools' runs, over TLS (with --run-protocol-address).")
	flag.StringVar(&o.runnerService, "runner-service", "conductor-tf-runs", "The Service in --namespace that runners reach the manager's run protocol through (the chart sets <release>-runs); its names are signed into the manager's certificate unless --runner-hosts is given.")
	flag.StringVar(&o.runnerHosts, "runner-hosts", "", "Comma-separated names runners reach the manager by, for its serving certificate (the first is the one runner pods are given); --runner-service's names in --namespace when empty.")
	flag.StringVar(&o.runnerImage, "runner-image", os.Getenv("RUNNER_IMAGE"), "Image of runner pods whose InfraRunnerPool names none (the manager's own).")
	flag.DurationVar(&o.heartbeatTimeout, "runner-heartbeat-timeout", runners.DefaultHeartbeatTimeout, "A run's lease on a runner pool: each heartbeat renews it for this long; a runner whose lease expires freezes its run, then kills it.")
	flag.DurationVar(&o.fenceGrace, "runner-fence-grace", runners.DefaultFenceGrace, "How much longer than its lease a silent run on a runner pool is waited for (its runner may resume it) before it is given up and its lock and state credentials released; a new leader leaves its predecessor's runner-pool locks alone for the lease plus this.")
	flag.StringVar(&o.serviceAccount, "service-account", os.Getenv("SERVICE_ACCOUNT_NAME"), "The controller's own ServiceAccount in --namespace: a class or resource whose kubernetesAccess names it is refused (ServiceAccountForbidden), as one naming a runner pool's.")
	flag.DurationVar(&o.grace, "grace-period", tfrunner.DefaultGracePeriod, "How long a run gets to stop after SIGINT on shutdown.")
	flag.DurationVar(&o.drainTimeout, "drain-timeout", DefaultDrainTimeout, "On SIGTERM, how long runs under way (in-process and on runner pools) go on before they are interrupted (SIGINT, then --grace-period); no run starts meanwhile and the manager stays leader. The pod's terminationGracePeriodSeconds must cover it and the grace period. Lost leadership interrupts at once.")
	flag.DurationVar(&o.queueTimeout, "runner-queue-timeout", runners.DefaultQueueTimeout, "How long a run waits for a runner of its pool before it is withdrawn (Synced False, WaitingForRunner) and queued again 30 s later: a pool with no runners holds no reconcile worker longer than this.")
	flag.StringVar(&o.runSandbox, "run-sandbox", sandboxAuto, sandboxFlagUsage)
	flag.StringVar(&o.sandboxHide, "run-sandbox-hide", "", "More paths, comma-separated, that runs cannot open (with --run-sandbox), e.g. mounted cloud credentials of the manager's own.")
	flag.StringVar(&o.sandboxRead, "run-sandbox-read", "", sandboxReadUsage)
	flag.StringVar(&o.sandboxWrite, "run-sandbox-write", "", sandboxWriteUsage)
	flag.StringVar(&o.runEnv, "run-env", "", runEnvUsage)
	flag.IntVar(&o.shardBuckets, "shard-buckets", 0, shardFlagUsage)
	flag.Float64Var(&o.apiQPS, "kube-api-qps", defaultKubeAPIQPS, kubeAPIQPSUsage)
	flag.IntVar(&o.apiBurst, "kube-api-burst", defaultKubeAPIBurst, "Requests the manager's client may send to the API server in a burst above --kube-api-qps (when it sets a limit).")
	zapOpts := zap.Options{Development: true}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := run(o); err != nil {
		ctrl.Log.WithName("setup").Error(err, "conductor-tf stopped")
		os.Exit(1)
	}
}

// elected reports whether the manager's Elected channel is closed: without leader election it is
// at start.
func elected(mgr ctrl.Manager) func() bool {
	ch := mgr.Elected()
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// lostLeadership reports the error controller-runtime's manager returns when its leader election
// lease was lost (manager/internal.go, OnStoppedLeading: "leader election lost").
func lostLeadership(err error) bool {
	return err != nil && strings.Contains(err.Error(), "leader election lost")
}

// drain ends the process's runs in order, whatever stopped the manager: on SIGTERM it has waited
// for its reconciles (GracefulShutdownTimeout), but on lost leadership controller-runtime skips
// that wait. Either way the runs' contexts are cancelled (Terraform got SIGINT); the pool is given
// the grace period to finish them, then the state server finishes the requests under way before
// the process exits. With leader election, the leader Lease is released (ReleaseOnCancel) or lost
// by then, and the state server refuses what runs still send (another replica may lead already):
// their creates stay in doubt for the next leader.
func drain(pool *tfrunner.Pool, remote *runners.Dispatcher, server *statebackend.Server, grace time.Duration) {
	log := ctrl.Log.WithName("shutdown")
	ctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	defer cancel()
	if !pool.Wait(ctx) {
		log.Info("runs still under way after the grace period", "grace", grace.String())
	}
	// Runs on runner pools were told to cancel with their reconciles; their final state writes
	// come through this process's state server.
	if remote != nil && !remote.Wait(ctx) {
		log.Info("runs on runner pools still under way after the grace period", "grace", grace.String())
	}
	if err := server.Shutdown(ctx); err != nil {
		log.Error(err, "the state server did not finish its requests")
	}
}

// leaderFence is how long a new leader (or a replica that took a bucket of resources) leaves its
// predecessor's in-process runs' locks alone: the lease duration plus the worst latency of the
// predecessor's kill (shard.Options.Fence): the predecessor stops serving at its renew deadline and
// kills its runs within shard.KillLatency after it, before the lease duration has passed; 0
// without leader election (one manager: its predecessor is dead).
func leaderFence(o options) time.Duration {
	if !o.leaderElect {
		return 0
	}
	return shard.Options{LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod}.Fence()
}

// runnerFence is how long a new leader leaves its predecessor's runner-pool runs' locks alone: a
// run's lease plus the fence grace; 0 when runner pools are not served.
func runnerFence(o options) time.Duration {
	if o.runProtocolAddr == "" {
		return 0
	}
	return o.heartbeatTimeout + o.fenceGrace
}

// baseRunEnv are the names of this process's environment variables every run gets: the CLI
// configuration, the CA bundle and the proxies.
var baseRunEnv = []string{"TF_CLI_CONFIG_FILE", "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}

// runEnvUsage documents --run-env for the manager and the runner.
var runEnvUsage = "Names, comma-separated, of this process's environment variables that every run gets (e.g. AWS_REGION), " +
	"besides PATH and " + strings.Join(baseRunEnv, ", ") + ". Nothing else of this process's environment reaches a run."

// runEnv is the environment every run starts from, for a process whose work directory is workDir:
// PATH, the plugin cache (written by init only), and the variables of this process's own
// environment named by baseRunEnv and extra (--run-env) that are set. HOME and TMPDIR are each
// workspace's own (tfrunner), never shared between runs.
func runEnv(workDir string, extra []string) map[string]string {
	env := map[string]string{
		"PATH":                os.Getenv("PATH"),
		"TF_PLUGIN_CACHE_DIR": filepath.Join(workDir, "plugin-cache"),
		"CHECKPOINT_DISABLE":  "1",
	}
	for _, k := range append(slices.Clone(baseRunEnv), extra...) {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

// makeRunDirs creates the directories runEnv names.
func makeRunDirs(env map[string]string) error {
	return os.MkdirAll(env["TF_PLUGIN_CACHE_DIR"], 0o700)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
