// Package lifecycle_test runs the whole controller — claim, resource and class controllers, the
// runner pool — against a real API server, a real tofu/terraform binary and real providers from
// the local mirror. Nothing here is faked.
package lifecycle_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	claimcontroller "github.com/conductor-tf/conductor-tf/internal/controller/claim"
	classcontroller "github.com/conductor-tf/conductor-tf/internal/controller/class"
	discoverycontroller "github.com/conductor-tf/conductor-tf/internal/controller/discovery"
	readypoolcontroller "github.com/conductor-tf/conductor-tf/internal/controller/readypool"
	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/secrets"
	runnerpoolcontroller "github.com/conductor-tf/conductor-tf/internal/controller/runnerpool"
	sharingcontroller "github.com/conductor-tf/conductor-tf/internal/controller/sharing"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/sandbox"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness"
	"github.com/conductor-tf/conductor-tf/test/harness/apiserver"
)

const (
	stateNamespace = "conductor-system"
	// stateKeySecret holds the suite's state encryption passphrase, as the manifests name it.
	stateKeySecret = "conductor-tf-state-key"
	// maxRuns is the pool's bound, asserted from the outside by the binary wrapper's log.
	maxRuns      = 2
	syncInterval = 8 * time.Second
)

var (
	// plainStates, while set, makes the state server neither encrypt nor decrypt (a spec that
	// reads a state with Terraform, which has no state encryption).
	plainStates atomic.Bool
	k8s         client.Client
	kube        kubernetes.Interface
	env         *harness.Env
	cancel      context.CancelFunc
	scheme      = runtime.NewScheme()
	runLog      string // every command the binary ran: "start|end <pid> <subcommand> <dir>"
	moduleDir   string
	// modulesURL is the git repository (tagged harness.ModulesVersion) that stands in for the
	// samples' remote module repository.
	modulesURL string
	binary     tfrunner.Binary
	// realBinary is the binary the wrapper runs; tfEnv the environment of every run.
	realBinary tfrunner.Binary
	tfEnv      map[string]string
	// metricsURL is the manager's metrics endpoint (plain HTTP on loopback, as `make run` serves it).
	metricsURL string
	// stateServer serves state to the runs, as in the manager.
	stateServer *statebackend.Server
	// teams makes each namespace's team client (only the infraclaim-editor role).
	teams *harness.Teams
	// runsDir is the pool's directory: a resource's workspace is runsDir/<resource name>.
	runsDir string
	// registry is the module registry every run trusts (its CA is the runs' SSL_CERT_FILE).
	registry *harness.ModuleRegistry
	// dispatcher serves runner pools as the manager does (--run-protocol-address); runners
	// reach it at runProtocolAddr and the state server at runnerStateURL.
	dispatcher                      *runners.Dispatcher
	runProtocolAddr, runnerStateURL string
	// suiteDir is the suite's temporary directory.
	suiteDir string
)

// Identities of the controller under test: every pod of a deployment shares the lock holder (Who),
// each has its own name.
const podName = "conductor-tf-7c9d5-pod-b"

// suiteQueueTimeout is how long a run waits for a runner before it is withdrawn: longer than the
// runner specs take to start their runners.
const suiteQueueTimeout = 20 * time.Second

func TestLifecycle(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "lifecycle")
}

// wrap writes a script that records the start and end of every command, then runs the real
// binary, forwarding SIGINT so that cancellation still reaches Terraform.
func wrap(dir string, real tfrunner.Binary) (string, string) {
	log := filepath.Join(dir, "runs.log")
	path := filepath.Join(dir, "bin", string(real.Flavor))
	Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
	script := fmt.Sprintf(`#!/bin/sh
echo "start $$ $1 $PWD" >> %[1]q
%[2]q "$@" &
child=$!
trap 'kill -INT $child' INT
wait $child; rc=$?
if [ $rc -gt 128 ]; then wait $child; rc=$?; fi
echo "end $$ $1 $PWD" >> %[1]q
exit $rc
`, log, real.Path)
	Expect(os.WriteFile(path, []byte(script), 0o755)).To(Succeed())
	return path, log
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(v1alpha1.AddToScheme(scheme)).To(Succeed())
	dir, err := os.MkdirTemp("", "conductor-lifecycle-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	suiteDir = dir
	env, err = harness.Start(dir, harness.CRDDir(), harness.FixtureCRDDir())
	Expect(err).NotTo(HaveOccurred())
	// Namespace deletion and garbage collection, as on a cluster: the rook-minio module's
	// namespace must really go away when it is destroyed.
	Expect(env.StartControllerManager(dir)).To(Succeed())
	modulesURL, err = harness.PublishModules(filepath.Join(dir, "modules.git"))
	Expect(err).NotTo(HaveOccurred())

	ctx := context.Background()
	bins, err := harness.Binaries(ctx)
	Expect(err).NotTo(HaveOccurred())
	wrapper, log := wrap(dir, bins[0])
	runLog = log
	binary, err = tfrunner.FindBinary(ctx, tfrunner.FindOptions{ExplicitPath: wrapper})
	Expect(err).NotTo(HaveOccurred())
	moduleDir, _ = filepath.Abs("testdata/modules/file")

	realBinary = bins[0]
	tfEnv, err = harness.TerraformEnv(filepath.Join(dir, "home"))
	Expect(err).NotTo(HaveOccurred())
	tfEnv["TF_PLUGIN_CACHE_DIR"] = filepath.Join(dir, "plugin-cache")
	Expect(os.MkdirAll(tfEnv["TF_PLUGIN_CACHE_DIR"], 0o700)).To(Succeed())
	registry, err = harness.StartModuleRegistry(dir)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(registry.Close)
	tfEnv["SSL_CERT_FILE"] = registry.CAFile
	runsDir = filepath.Join(dir, "runs")
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{
		Binary: binary, Dir: runsDir, Env: tfEnv, MaxConcurrent: maxRuns, Observer: metrics.Pool{},
	})
	Expect(err).NotTo(HaveOccurred())

	k8s, err = client.New(env.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	kube = kubernetes.NewForConfigOrDie(env.Config)
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stateNamespace}})).To(Succeed())
	teams, err = harness.NewTeams(ctx, k8s, env.Config)
	Expect(err).NotTo(HaveOccurred())
	// The rook-minio module's runs get the sample's ServiceAccount (kubernetesAccess), nothing else.
	Expect(harness.ApplyFiles(ctx, k8s, "config/samples/rook_minio_rbac.yaml")).To(Succeed())
	runCluster, err := secrets.RunClusterFor(env.Config)
	Expect(err).NotTo(HaveOccurred())
	stateServer = statebackend.NewServer(kube, stateNamespace, statebackend.DefaultHistoryLimit)
	// States and plans encrypted as a new install has them (--state-encryption-secret): every
	// spec's state goes through the key, and what reads state (outputs, history, restore,
	// adoption, import, drift) reads it through the keyring.
	stateKeys := statebackend.NewKeySource(kube, stateNamespace, stateKeySecret)
	_, err = stateKeys.Load(ctx, true)
	Expect(err).NotTo(HaveOccurred())
	stateServer.Store().SetKeys(func() *statebackend.Keyring {
		if plainStates.Load() {
			return nil
		}
		return stateKeys.Keyring()
	})
	stateKeys.Refresh = time.Second // the rotation spec waits for it
	keysCtx, stopKeys := context.WithCancel(context.Background())
	DeferCleanup(stopKeys)
	go stateKeys.Run(keysCtx)
	serverCtx, stopServer := context.WithCancel(context.Background())
	DeferCleanup(stopServer)
	Expect(stateServer.Start(serverCtx, "127.0.0.1:0")).To(Succeed())
	// Runner pools, served as the manager serves them: TLS from the CA Secret, TokenReview.
	runProtocolAddr = apiserver.FreeAddr(GinkgoT())
	var stateAddr string
	dispatcher, stateAddr, err = runners.Serve(serverCtx, runners.ServeOptions{
		Kube: kube, Namespace: stateNamespace, Hosts: []string{"127.0.0.1"},
		Address: runProtocolAddr, StateAddress: "127.0.0.1:0", State: stateServer,
		Authorize: runners.PoolAuthorizer(k8s, stateNamespace), HeartbeatTimeout: 5 * time.Second, FenceGrace: 10 * time.Second,
		QueueTimeout: suiteQueueTimeout,
	})
	Expect(err).NotTo(HaveOccurred())
	runnerStateURL = "https://" + stateAddr

	metricsAddr := apiserver.FreeAddr(GinkgoT())
	metricsURL = "http://" + metricsAddr + "/metrics"
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: metricsAddr}, HealthProbeBindAddress: "0",
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	Expect(err).NotTo(HaveOccurred())
	metrics.Register(metrics.Sources{Reader: mgr.GetCache(), Locks: statebackend.LockTimes(kube, stateNamespace), Elected: mgr.Elected(), SyncInterval: syncInterval})
	metrics.SetRunSandbox("none", sandbox.ABI(), false, false) // runs of this suite are not confined (test/access's are)
	rec := mgr.GetEventRecorder("conductor-tf")
	Expect((&claimcontroller.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, MaxConcurrentReconciles: 4, Ready: &metrics.ClaimReady{},
		ConnectionSecretCheck: 5 * time.Second, Namespace: stateNamespace, SharedJoinRefresh: time.Second,
	}).SetupWithManager(mgr)).To(Succeed())
	Expect((&sharingcontroller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, Grace: 3 * time.Second}).SetupWithManager(mgr)).To(Succeed())
	resources, err := resourcecontroller.New(resourcecontroller.Options{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Kube: kube, Recorder: rec, Runs: &runners.Router{Local: pool, Remote: dispatcher, KeepErrored: stateServer.KeepErrored},
		State:       statebackend.Config{Namespace: stateNamespace, KubeconfigPath: env.Kubeconfig},
		StateServer: stateServer, RunCluster: runCluster,
		// As in the manager: many resource reconciles, most of them waiting in the pool's fair queue.
		SyncInterval: syncInterval, SecretCheckInterval: 2 * time.Second, MaxConcurrentReconciles: 64, SharedGrace: 3 * time.Second,
		Identity: resourcecontroller.RunIdentity{Who: statebackend.Who(), Controller: podName},
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(resources.SetupWithManager(mgr)).To(Succeed())
	Expect((&runnerpoolcontroller.Reconciler{
		Client: mgr.GetClient(), Namespace: stateNamespace, Image: "conductor-tf/controller:dev",
		Targets:   runnerpoolcontroller.Targets{Manager: runProtocolAddr, StateURL: runnerStateURL, CAConfigMap: runners.CAName, Audience: runners.Audience},
		Connected: func(pool string) int { return len(dispatcher.Runners(pool)) },
	}).SetupWithManager(mgr)).To(Succeed())
	Expect((&classcontroller.Reconciler{
		Client: mgr.GetClient(), Recorder: rec,
		Modules: &tfrunner.ModuleCache{Binary: binary, Env: tfEnv, Dir: filepath.Join(dir, "modules")},
		Secrets: mgr.GetAPIReader(), Namespace: stateNamespace,
	}).SetupWithManager(mgr)).To(Succeed())
	Expect((&readypoolcontroller.Reconciler{Client: mgr.GetClient(), Recorder: rec}).SetupWithManager(mgr)).To(Succeed())
	Expect((&discoverycontroller.Reconciler{Client: mgr.GetClient(), Recorder: rec, Secrets: mgr.GetAPIReader(), Namespace: stateNamespace}).SetupWithManager(mgr)).To(Succeed())

	var mctx context.Context
	mctx, cancel = context.WithCancel(context.Background())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// command is one Terraform command the wrapper recorded.
type command struct {
	start bool
	op    string
	dir   string
}

func commands() []command {
	f, err := os.Open(runLog)
	if os.IsNotExist(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var out []command
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 {
			continue
		}
		out = append(out, command{start: fields[0] == "start", op: fields[2], dir: fields[3]})
	}
	return out
}

// countOps counts the commands named op that started in a workspace directory ending in dirSuffix.
func countOps(op, dirSuffix string) int {
	n := 0
	for _, c := range commands() {
		if c.start && c.op == op && strings.HasSuffix(c.dir, "/"+dirSuffix) {
			n++
		}
	}
	return n
}

// runs counts the run commands (plan, apply) of a resource's workspace: a run is one apply -json,
// or plan then apply for a resource that stops between them.
func runs(resource string) int { return countOps("plan", resource) + countOps("apply", resource) }

// sharedInits counts the inits run in the pool's shared init directories (one per module version
// and backend block).
func sharedInits() int {
	n := 0
	for _, c := range commands() {
		if c.start && c.op == "init" && strings.Contains(c.dir, "/.modules/") {
			n++
		}
	}
	return n
}

// maxOverlap is the largest number of run commands (not version checks or module fetches, which
// do not take a pool slot) that were running at the same moment, from the log's append order.
func maxOverlap() int {
	running, peak := 0, 0
	for _, c := range commands() {
		if c.op == "version" || c.op == "get" || c.op == "-version" {
			continue
		}
		if c.start {
			running++
		} else {
			running--
		}
		peak = max(peak, running)
	}
	return peak
}
