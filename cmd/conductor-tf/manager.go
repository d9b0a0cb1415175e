package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-version"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	conductorv1alpha1 "github.com/conductor-tf/conductor-tf/api/v1alpha1"
	claimcontroller "github.com/conductor-tf/conductor-tf/internal/controller/claim"
	classcontroller "github.com/conductor-tf/conductor-tf/internal/controller/class"
	discoverycontroller "github.com/conductor-tf/conductor-tf/internal/controller/discovery"
	readypoolcontroller "github.com/conductor-tf/conductor-tf/internal/controller/readypool"
	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/secrets"
	sharingcontroller "github.com/conductor-tf/conductor-tf/internal/controller/sharing"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/shard"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/warm"
)

// manager is the controller manager's process as run builds it, step by step: the leader Lease's
// clock, controller-runtime's manager, the Terraform binary and the run pool, the state server,
// the run protocol for runner pools, and the reconcilers.
type manager struct {
	o       options
	log     logr.Logger
	cfg     *rest.Config
	kube    kubernetes.Interface
	drainer *queue.Drain
	leader  *leaderClock
	mgr     ctrl.Manager

	bin     tfrunner.Binary
	env     map[string]string
	runsDir string
	warm    *warm.Providers // nil: no warm providers
	pool    *tfrunner.Pool

	stateServer *statebackend.Server
	runs        *runners.Router
	resources   *resourcecontroller.Reconciler // set by setupReconcilers, before the manager starts
	shard       *shard.Coordinator             // nil: no sharding (--shard-buckets=0)
}

// run is the manager's life: it builds the process (the steps below), starts it, and on its end
// (SIGTERM, lost leadership, an error) stops the runs in order (stop). It returns the manager's
// error, or the first step's that failed.
func run(o options) error {
	// The handler comes first: the manager is PID 1 of its container, where a SIGTERM with no
	// handler is ignored, so one that came during the steps below (a pod deleted as it starts: a
	// scale-down right after a rollout) was lost, and the replica held its share of the buckets
	// for its whole grace period (seen in the e2e sharding spec). Caught here, it ends the start
	// at once: the manager starts with a done context and stops in order.
	signals := ctrl.SetupSignalHandler()
	m := &manager{o: o, log: ctrl.Log.WithName("setup"), cfg: ctrl.GetConfigOrDie(), drainer: queue.NewDrain()}
	withClientLimits(m.cfg, o.apiQPS, o.apiBurst)
	var err error
	if m.kube, err = kubernetes.NewForConfig(m.cfg); err != nil {
		return err
	}
	// In a pod (the Deployment sets POD_NAME), its deletion stops the manager too, whether or not
	// a SIGTERM came (poddeletion.go).
	signals = stopOnPodDeletion(signals, m.kube, o.namespace, os.Getenv("POD_NAME"), podCheckPeriod, m.log)
	if err := m.newManager(); err != nil {
		return err
	}
	if err := m.newShard(); err != nil {
		return err
	}
	if err := m.newRunPool(context.Background()); err != nil {
		return err
	}
	if m.warm != nil {
		defer m.warm.Close()
	}
	// The state server and the run protocol outlive the manager: runs cancelled at shutdown still
	// save their state and release their lock through them while the manager waits for them.
	serverCtx, stopServer := context.WithCancel(context.Background())
	defer stopServer()
	if err := m.startStateServer(serverCtx); err != nil {
		return err
	}
	if err := m.serveRunnerPools(serverCtx); err != nil {
		return err
	}
	if err := m.setupReconcilers(); err != nil {
		return err
	}
	m.log.Info("starting the manager", "maxConcurrentRuns", m.pool.MaxConcurrent(), "stateNamespace", o.namespace,
		"lockHolder", statebackend.Who(), "pod", o.podName, "stateServer", m.stateServer.Addr())
	// SIGTERM drains: no run starts, runs under way finish or are interrupted at the deadline.
	context.AfterFunc(signals, func() { m.drainer.Begin(o.drainTimeout) })
	err = m.mgr.Start(signals)
	m.stop(err)
	return err
}

// newManager makes controller-runtime's manager: the scheme, metrics (authenticated and
// authorized when secure, as kubebuilder v4's), probes, the leader Lease through leaderClock, the
// graceful shutdown timeout (drain + grace + 10 s), and the caches (no Secrets; Deployments and
// ServiceAccounts of the controller's namespace only).
func (m *manager) newManager() error {
	o := m.o
	scheme := kruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(conductorv1alpha1.AddToScheme(scheme))
	// On SIGTERM runs under way go on for the drain timeout, then get SIGINT and up to the grace
	// period to stop; the manager waits a little longer for its reconciles, so that each run's
	// outcome is recorded before the pod goes (and it stays leader meanwhile: ReleaseOnCancel).
	grace := o.drainTimeout + o.grace + 10*time.Second
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if o.metricsSecure {
		// kubebuilder v4: TokenReview authenticates the caller, SubjectAccessReview authorizes
		// get on /metrics; the certificate is self-signed unless one is mounted.
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	if !o.http2 {
		metricsOpts.TLSOpts = append(metricsOpts.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	// The leader Lease through a lock that also tells when it was last renewed: the state server
	// refuses runs once that is past the renew deadline (leaderClock).
	var err error
	if m.leader, err = newLeaderClock(m.cfg, o.namespace, o.podName); err != nil {
		return err
	}
	if o.leaderElect {
		m.log.Info("leader election", "lease", o.namespace+"/"+leaderElectionID, "identity", m.leader.Identity())
	}
	lease, renew, retry := leaseDuration, renewDeadline, retryPeriod
	m.mgr, err = ctrl.NewManager(m.cfg, ctrl.Options{
		Scheme:                              scheme,
		Metrics:                             metricsOpts,
		HealthProbeBindAddress:              o.probeAddr,
		PprofBindAddress:                    o.pprofAddr,
		LeaderElection:                      o.leaderElect,
		LeaderElectionResourceLockInterface: m.leader,
		LeaseDuration:                       &lease,
		RenewDeadline:                       &renew,
		RetryPeriod:                         &retry,
		LeaderElectionReleaseOnCancel:       true,
		GracefulShutdownTimeout:             &grace,
		// Secrets are read and written one at a time (inputs, connection Secrets, state): never
		// cached, so the controller neither holds every Secret of the cluster in memory nor needs
		// to list and watch them cluster-wide.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		// Runner pools' Deployments live in the manager's namespace only (a namespaced Role).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:     {Namespaces: map[string]cache.Config{o.namespace: {}}},
			&corev1.ServiceAccount{}: {Namespaces: map[string]cache.Config{o.namespace: {}}},
		}},
	})
	return err
}

// newRunPool finds (or installs) the Terraform binary, prepares the runs' environment (the CLI
// configuration, the sandbox, the run directories, warm providers) and makes the in-process pool.
// Errors: an unparsable --install-terraform-version, no binary, a sandbox that cannot be set up.
func (m *manager) newRunPool(ctx context.Context) error {
	o := m.o
	find := tfrunner.FindOptions{ExplicitPath: o.terraformPath}
	if o.installVersion != "" {
		v, err := version.NewVersion(o.installVersion)
		if err != nil {
			return fmt.Errorf("--install-terraform-version: %w", err)
		}
		find.InstallVersion, find.InstallDir = v, filepath.Join(o.workDir, "bin")
		if err := os.MkdirAll(find.InstallDir, 0o755); err != nil {
			return err
		}
	}
	var err error
	if m.bin, err = tfrunner.FindBinary(ctx, find); err != nil {
		return err
	}
	m.log.Info("terraform binary", "binary", m.bin.String())
	m.runsDir = filepath.Join(o.workDir, "runs")
	m.env = runEnv(o.workDir, splitList(o.runEnv))
	if _, err := ensureCLIConfig(m.env, o.workDir); err != nil {
		return err
	}
	if m.bin.Sandbox, err = newSandbox(o.runSandbox, sandboxSetup{
		workDir: o.workDir, binary: m.bin.Path, env: m.env,
		hide: splitList(o.sandboxHide), read: splitList(o.sandboxRead), write: splitList(o.sandboxWrite),
	}, func(f string, a ...any) { m.log.Info(fmt.Sprintf(f, a...)) }); err != nil {
		return err
	}
	// Nothing of the controller's own Kubernetes credentials reaches a run: no KUBECONFIG, no
	// KUBE_CONFIG_PATH, no KUBERNETES_SERVICE_* (the kubernetes provider's in-cluster config), and
	// with the sandbox no file of them either (the token under /var/run/secrets, the kubeconfig). A
	// class grants a run credentials of its own with kubernetesAccess.
	if o.kubeconfig != "" {
		m.log.Info("--state-kubeconfig is ignored: state goes through the controller's state server, and runs get Kubernetes credentials only from a class's kubernetesAccess")
	}
	if err := makeRunDirs(m.env); err != nil {
		return err
	}
	if providers := splitList(o.warmProviders); len(providers) > 0 && o.warmProviders != "none" {
		m.warm = warm.New(filepath.Join(m.runsDir, ".warm"))
		m.warm.Sandbox = m.bin.Sandbox
		m.warm.Providers = providers
	}
	m.pool, err = tfrunner.NewPool(tfrunner.PoolOptions{
		Binary: m.bin, Dir: m.runsDir, Env: m.env, MaxConcurrent: o.maxRuns, GracePeriod: o.grace,
		Observer: metrics.Pool{}, WarmProviders: m.warm, Drain: m.drainer,
	})
	return err
}

// startStateServer starts the state server (Terraform's http backend) on --state-server-address
// until ctx ends; with leader election it serves runs only while this replica leads (leaderClock).
func (m *manager) startStateServer(ctx context.Context) error {
	m.stateServer = statebackend.NewServer(m.kube, m.o.namespace, m.o.stateHistory)
	stateLog := ctrl.Log.WithName("state-server")
	if err := m.loadStateKeys(ctx, stateLog); err != nil {
		return err
	}
	m.stateServer.OnError = func(runID, suffix string, status int, err error) {
		stateLog.Info("request refused", "run", runID, "state", suffix, "status", status, "reason", err.Error())
	}
	m.stateServer.OnPending = func(suffix string, _ []byte, err error) {
		stateLog.Error(err, "a run's state could not be saved; it is kept until it is", "state", suffix)
	}
	switch {
	case m.shard != nil: // every replica serves the runs of its share
		m.stateServer.Serves = m.servesRun
	case m.o.leaderElect:
		m.stateServer.Leading = m.leader.Leading
	}
	if err := m.stateServer.Start(ctx, m.o.stateServerAddr); err != nil {
		return fmt.Errorf("state server: %w", err)
	}
	m.runs = &runners.Router{Local: m.pool, KeepErrored: m.stateServer.KeepErrored}
	return nil
}

// loadStateKeys makes the state server's store encrypt and decrypt with the keyring of
// --state-encryption-secret (created when missing), read again in the background until ctx ends.
// It returns an error when the runs' binary is Terraform (which has no state encryption: it would
// neither read encrypted states nor encrypt its own) or the Secret cannot be read or used.
func (m *manager) loadStateKeys(ctx context.Context, log logr.Logger) error {
	if m.o.stateKeySecret == "" {
		log.Info("states and plans are not encrypted (no --state-encryption-secret)")
		return nil
	}
	if m.bin.Flavor != tfrunner.OpenTofu {
		return fmt.Errorf("--state-encryption-secret=%s needs OpenTofu (state and plan encryption are OpenTofu's), and runs use %s: "+
			"run OpenTofu, or pass --state-encryption-secret= to keep states plain", m.o.stateKeySecret, m.bin.String())
	}
	keys := statebackend.NewKeySource(m.kube, m.o.namespace, m.o.stateKeySecret)
	created, err := keys.Load(ctx, true)
	if err != nil {
		return fmt.Errorf("state encryption: %w", err)
	}
	keys.OnError = func(err error) { log.Error(err, "state encryption keys not read again; the last ones stay in use") }
	go keys.Run(ctx)
	m.stateServer.Store().SetKeys(keys.Keyring)
	log.Info("states and plans are encrypted", "secret", m.o.namespace+"/"+m.o.stateKeySecret, "created", created, "key", keys.Keyring().KeyID())
	return nil
}

// serveRunnerPools serves the run protocol (--run-protocol-address) and sets up the runner pool
// reconciler, when runner pools are served: from the moment this replica holds the leader Lease.
func (m *manager) serveRunnerPools(ctx context.Context) error {
	o := m.o
	if o.runProtocolAddr == "" {
		return nil
	}
	leading, leader := elected(m.mgr), func() string { return "" }
	if o.leaderElect {
		// A run whose leader dies must outlive the next leader's takeover (runners.CheckTakeover).
		if err := runners.CheckTakeover(o.heartbeatTimeout, runners.DefaultHeartbeatInterval, o.fenceGrace, leaseDuration, retryPeriod); err != nil {
			return err
		}
		_, port, err := net.SplitHostPort(o.runProtocolAddr)
		if err != nil {
			return fmt.Errorf("--run-protocol-address: %w", err)
		}
		leading = m.leader.Leading
		leader = (&leaderAddress{clock: m.leader, pods: m.kube.CoreV1().Pods(o.namespace), pod: o.podName, port: port}).Leader
	}
	var err error
	if m.runs.Remote, err = startRunProtocol(ctx, o, m.kube, m.mgr, m.stateServer, m.drainer, leading, leader); err != nil {
		return fmt.Errorf("run protocol: %w", err)
	}
	m.log.Info("serving runner pools", "runProtocol", o.runProtocolAddr, "stateServer", o.runnerStateAddr)
	return setupRunnerPools(ctx, o, m.kube, m.mgr, m.runs.Remote)
}

// setupReconcilers registers the metrics' sources, the claim, resource and class reconcilers, and
// the health probes.
func (m *manager) setupReconcilers() error {
	o, mgr := m.o, m.mgr
	runCluster, err := secrets.RunClusterFor(m.cfg)
	if err != nil {
		return err
	}
	rec := mgr.GetEventRecorder("conductor-tf")
	metrics.Register(metrics.Sources{Reader: mgr.GetCache(), Locks: statebackend.LockTimes(m.kube, o.namespace), Elected: mgr.Elected(), SyncInterval: o.syncInterval})
	if err := (&claimcontroller.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, MaxConcurrentReconciles: o.workers, Ready: &metrics.ClaimReady{},
		Namespace: o.namespace,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&sharingcontroller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec}).SetupWithManager(mgr); err != nil {
		return err
	}
	opts := resourcecontroller.Options{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Kube: m.kube, Recorder: rec, Runs: m.runs, Drain: m.drainer,
		State: statebackend.Config{Namespace: o.namespace}, StateServer: m.stateServer, RunCluster: runCluster,
		Identity:    resourcecontroller.RunIdentity{Who: statebackend.Who(), Controller: o.podName},
		RunnerFence: runnerFence(o), LeaderFence: leaderFence(o), ControllerServiceAccount: o.serviceAccount,
		MaxConcurrentDriftChecks: o.driftChecks, StaleLockAfter: o.staleLockAfter,
		SyncInterval: o.syncInterval, SecretCheckInterval: o.secretCheck, KeepRunLogs: o.keepRunLogs, MaxConcurrentReconciles: o.resourceWorkers,
	}
	if m.shard != nil {
		opts.Shard = m.shard
	}
	resources, err := resourcecontroller.New(opts)
	if err != nil {
		return err
	}
	if err := resources.SetupWithManager(mgr); err != nil {
		return err
	}
	m.resources = resources
	if err := (&classcontroller.Reconciler{
		Client: mgr.GetClient(), Recorder: rec,
		Modules: &tfrunner.ModuleCache{Binary: m.bin, Env: m.env, Dir: filepath.Join(o.workDir, "modules")},
		Secrets: mgr.GetAPIReader(), Namespace: o.namespace,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&readypoolcontroller.Reconciler{Client: mgr.GetClient(), Recorder: rec}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&discoverycontroller.Reconciler{Client: mgr.GetClient(), Recorder: rec, Secrets: mgr.GetAPIReader(), Namespace: o.namespace}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
}

// stop ends the runs once the manager stopped with err: what is still running is interrupted now
// (after SIGTERM the reconciles had until GracefulShutdownTimeout); on lost leadership or a lapsed
// shard membership the runs' processes are killed at once and every credential revoked; then drain.
func (m *manager) stop(err error) {
	m.drainer.Interrupt()
	if lostLeadership(err) || lostMembership(err) {
		// Another replica may lead, or hold this one's buckets, already: this one's runs stop at
		// once (SIGKILL, no grace; what they had started creating is in doubt, and the next owner
		// resolves it), and with them every credential this process issued (the state server
		// refuses them already).
		killed := procs.Reap(m.runsDir, true)
		m.log.Info("leadership or shard membership lost: runs killed and their state credentials revoked", "processes", killed, "reason", err.Error())
		m.stateServer.RevokeAll()
	}
	drain(m.pool, m.runs.Remote, m.stateServer, m.o.grace)
}
