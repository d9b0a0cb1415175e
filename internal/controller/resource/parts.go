package resource

import (
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/internal/controller/resource/secrets"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// The resource reconciler's collaborators, each built once from the reconciler's configuration
// (newParts) with only what it uses; none holds the reconciler. The phases in Reconcile call them.
type (
	// stateKeeper names, guards, restores, locks and reads a resource's state (state.go, runs.go,
	// imports.go).
	stateKeeper struct {
		api            client.Client
		recorder       events.EventRecorder
		config         statebackend.Config
		clientset      kubernetes.Interface
		backend        stateBackend
		names          *stateNames // nil: a name is checked with the API server
		fence          *fence
		identity       RunIdentity
		staleLockAfter time.Duration
	}

	// syncer decides, runs and records a resource's plan, apply and drift check (sync.go,
	// failures.go, approval.go, drift.go, adopt.go).
	syncer struct {
		api                 client.Client
		recorder            events.EventRecorder
		runs                Runs
		keeper              *stateKeeper
		secrets             *secrets.Keeper
		fence               *fence
		identity            RunIdentity
		syncInterval        time.Duration
		secretCheckInterval time.Duration
		driftSlots          chan struct{} // one per drift check that may run at once
	}

	// reclaimer carries out a deleted resource's reclaim policy (reclaim.go, reclaim_creates.go).
	reclaimer struct {
		api      client.Client
		reader   client.Reader
		recorder events.EventRecorder
		runs     Runs
		keeper   *stateKeeper
		secrets  *secrets.Keeper
		sync     *syncer
	}
)

// fence says since when this manager serves a resource and how long it then leaves alone the locks
// of runs an earlier manager started (Reconciler.RunnerFence, LeaderFence).
type fence struct {
	once   sync.Once
	since  time.Time
	runner time.Duration
	leader time.Duration
	// taken, when set (sharding), is when this replica took a resource's bucket (Shard.Since).
	taken func(name string) time.Time
}

// leadingSince is when this manager began reconciling resources (the first call): reconciles run
// only on the leader, so it is when it began to lead.
func (f *fence) leadingSince() time.Time {
	f.once.Do(func() { f.since = time.Now() })
	return f.since
}

// servingSince is when this manager began to serve resource name: when it began to lead, or with
// sharding when it took the resource's bucket, whichever is later.
func (f *fence) servingSince(name string) time.Time {
	since := f.leadingSince()
	if f.taken != nil {
		if t := f.taken(name); t.After(since) {
			since = t
		}
	}
	return since
}

// runnerWait is how long the runner fence still holds for resource name (≤ 0: passed).
func (f *fence) runnerWait(name string) time.Duration {
	return f.runner - time.Since(f.servingSince(name))
}

// leaderWait is how long the leader fence still holds for resource name (≤ 0: passed).
func (f *fence) leaderWait(name string) time.Duration {
	return f.leader - time.Since(f.servingSince(name))
}

// parts are the reconciler's collaborators.
type parts struct {
	keeper  *stateKeeper
	secrets *secrets.Keeper
	sync    *syncer
	reclaim *reclaimer
	fence   *fence
}

// newParts builds the collaborators from r's configuration (New): defaults applied
// (DefaultSyncInterval, DefaultSecretCheckInterval, DefaultStaleLockAfter, one drift check).
func (r *Reconciler) newParts() *parts {
	f := &fence{runner: r.opts.RunnerFence, leader: r.opts.LeaderFence}
	if r.opts.Shard != nil {
		f.taken = func(name string) time.Time { return r.opts.Shard.Since(ShardKey(name)) }
	}
	k := &stateKeeper{api: r.Client, recorder: r.opts.Recorder, config: r.opts.State, clientset: r.opts.Kube, backend: r.stateBackend(),
		fence: f, identity: r.opts.Identity, staleLockAfter: r.opts.StaleLockAfter}
	if k.staleLockAfter <= 0 {
		k.staleLockAfter = DefaultStaleLockAfter
	}
	sec := secrets.New(secrets.Options{Client: r.Client, Reader: r.opts.APIReader, Kube: r.opts.Kube, Recorder: r.opts.Recorder,
		Namespace: r.opts.State.Namespace, RunCluster: r.opts.RunCluster, ControllerAccount: r.opts.ControllerServiceAccount,
		KeepRunLogs: r.opts.KeepRunLogs})
	sy := &syncer{api: r.Client, recorder: r.opts.Recorder, runs: r.opts.Runs, keeper: k, secrets: sec, fence: f, identity: r.opts.Identity,
		syncInterval: orDefault(r.opts.SyncInterval, DefaultSyncInterval), secretCheckInterval: orDefault(r.opts.SecretCheckInterval, DefaultSecretCheckInterval),
		driftSlots: make(chan struct{}, max(1, r.opts.MaxConcurrentDriftChecks))}
	rc := &reclaimer{api: r.Client, reader: r.opts.APIReader, recorder: r.opts.Recorder, runs: r.opts.Runs,
		keeper: k, secrets: sec, sync: sy}
	return &parts{keeper: k, secrets: sec, sync: sy, reclaim: rc, fence: f}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// parts are the collaborators New built.
func (r *Reconciler) parts() *parts { return r.built }

func (r *Reconciler) keeper() *stateKeeper     { return r.parts().keeper }
func (r *Reconciler) secrets() *secrets.Keeper { return r.parts().secrets }
func (r *Reconciler) reclaimer() *reclaimer    { return r.parts().reclaim }
func (r *Reconciler) syncer() *syncer          { return r.parts().sync }

// stateBackend is where runs keep state: the state server when there is one, else Terraform's
// kubernetes backend on the same Secrets.
func (r *Reconciler) stateBackend() stateBackend {
	if r.opts.StateServer != nil {
		return serverBackend{server: r.opts.StateServer}
	}
	return kubernetesBackend{clientset: r.opts.Kube, config: r.opts.State}
}
