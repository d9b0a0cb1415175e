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
	"slices"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	managerFlags(flag.CommandLine, &o, thisMachine())
	zapOpts := loggerOptions()
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
