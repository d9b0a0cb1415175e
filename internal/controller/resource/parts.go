package resource

import (
	"time"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/secrets"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
)

// The resource reconciler's collaborators, each built once from the reconciler's configuration
// (newParts) with only what it uses; none holds the reconciler. The phases in Reconcile call them.
type (
	// syncer decides, runs and records a resource's plan and apply (sync.go, failures.go,
	// approval.go, adopt.go, rotation.go, pause.go, state.go).
	syncer struct {
		api                 client.Client
		recorder            events.EventRecorder
		runs                Runs
		keeper              *state.Keeper
		secrets             *secrets.Keeper
		fence               *state.Fence
		identity            RunIdentity
		syncInterval        time.Duration
		secretCheckInterval time.Duration
	}

	// drifter runs a resource's drift check instead of an apply once its spec was applied, at
	// most one per drift slot at once (drift.go).
	drifter struct {
		recorder            events.EventRecorder
		runs                Runs
		keeper              *state.Keeper
		secrets             *secrets.Keeper
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
		keeper   *state.Keeper
		secrets  *secrets.Keeper
		// sharedGrace: how long a shared resource being deleted waits after a join (protectShared).
		sharedGrace time.Duration
		sync        *syncer
	}
)

// parts are the reconciler's collaborators.
type parts struct {
	keeper  *state.Keeper
	secrets *secrets.Keeper
	sync    *syncer
	drift   *drifter
	reclaim *reclaimer
	fence   *state.Fence
	// provision is what happens past the binding: provisioning with Runs, bindingOnly without.
	provision provisioner
}

// newParts builds the collaborators from r's configuration (New): defaults applied
// (DefaultSyncInterval, DefaultSecretCheckInterval, state.DefaultStaleLockAfter, one drift check).
func (r *Reconciler) newParts() *parts {
	var taken func(string) time.Time
	if r.opts.Shard != nil {
		taken = func(name string) time.Time { return r.opts.Shard.Since(ShardKey(name)) }
	}
	f := state.NewFence(r.opts.RunnerFence, r.opts.LeaderFence, taken)
	k := state.New(state.Options{Recorder: r.opts.Recorder, Server: r.opts.StateServer, Kube: r.opts.Kube, Config: r.opts.State,
		Fence: f, Who: r.opts.Identity.Who, Controller: r.opts.Identity.Controller, StaleLockAfter: r.opts.StaleLockAfter})
	sec := secrets.New(secrets.Options{Client: r.Client, Reader: r.opts.APIReader, Kube: r.opts.Kube, Recorder: r.opts.Recorder,
		Namespace: r.opts.State.Namespace, RunCluster: r.opts.RunCluster, ControllerAccount: r.opts.ControllerServiceAccount,
		KeepRunLogs: r.opts.KeepRunLogs})
	sy := &syncer{api: r.Client, recorder: r.opts.Recorder, runs: r.opts.Runs, keeper: k, secrets: sec, fence: f, identity: r.opts.Identity,
		syncInterval: orDefault(r.opts.SyncInterval, DefaultSyncInterval), secretCheckInterval: orDefault(r.opts.SecretCheckInterval, DefaultSecretCheckInterval)}
	dr := &drifter{recorder: r.opts.Recorder, runs: r.opts.Runs, keeper: k, secrets: sec, identity: r.opts.Identity,
		syncInterval: sy.syncInterval, secretCheckInterval: sy.secretCheckInterval,
		driftSlots: make(chan struct{}, max(1, r.opts.MaxConcurrentDriftChecks))}
	rc := &reclaimer{api: r.Client, reader: r.opts.APIReader, recorder: r.opts.Recorder, runs: r.opts.Runs,
		keeper: k, secrets: sec, sync: sy, sharedGrace: r.opts.SharedGrace}
	if rc.sharedGrace <= 0 {
		rc.sharedGrace = provision.SharedGrace
	}
	var prov provisioner = newBindingOnly(rc)
	if r.opts.Runs != nil {
		prov = newProvisioning(provisioning{api: r.Client, recorder: r.opts.Recorder, runs: r.opts.Runs, keeper: k, sync: sy, drift: dr, reclaim: rc,
			stateNamespace: r.opts.State.Namespace})
	}
	return &parts{keeper: k, secrets: sec, sync: sy, drift: dr, reclaim: rc, fence: f, provision: prov}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// parts are the collaborators New built.
func (r *Reconciler) parts() *parts { return r.built }

func (r *Reconciler) keeper() *state.Keeper { return r.parts().keeper }
