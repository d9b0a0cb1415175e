// Package resource is the resource lifecycle.
//
// An InfraResource is one piece of infrastructure. This controller keeps its finalizer, observes
// its claim the way the PV controller does a PV's (syncVolume): no claimRef → Available; a
// claimRef without a UID (a reservation) → Available; a claimRef naming a live claim with that UID
// → Bound; a claimRef with a UID naming a claim that is gone, being deleted, or has another UID →
// Released. Reconcile is a list of phases over one scope (scope.go) that writes the status once,
// its phase computed then (phaseOf, status.go); past the binding, the provisioner chosen in New
// adds its phases (provisioner.go): with Runs, the run phases (sync.go) and the reclaim
// (reclaim.go); without (bindingOnly), none, and a resource takes its binding's phase as soon as
// it exists. The collaborators the phases call are in parts.go.
package resource

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/secrets"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
)

// Backoff of failed runs: the first retry after FailureBackoffBase, doubling up to FailureBackoffMax.
const (
	FailureBackoffBase = time.Second
	FailureBackoffMax  = 5 * time.Minute
)

// Options configure a resource Reconciler (New). Client and Recorder are required; with Runs,
// Kube, APIReader and State.Namespace are too.
type Options struct {
	client.Client
	// APIReader reads Secret inputs directly from the API server (Secrets are not cached).
	APIReader client.Reader
	// Kube is the client-go clientset statebackend uses for state Secrets and Leases.
	Kube     kubernetes.Interface
	Recorder events.EventRecorder
	// Runs executes Terraform; nil chooses the bindingOnly provisioner: nothing runs and resources
	// are Available at once (the binding suites, which test the controller's decisions only).
	Runs Runs
	// Drain, when set, is the manager's shutdown: reconciles outlive the manager's context (a
	// SIGTERM cancels it at once) until the drain's deadline, so that a run under way finishes
	// and its outcome is recorded; the carriers start no run once it began (queue.Drain).
	Drain *queue.Drain
	// ControllerServiceAccount is the controller's own ServiceAccount (in State.Namespace): a
	// kubernetesAccess naming it is refused (ServiceAccountForbidden), as one naming a runner
	// pool's. Empty: only pools' accounts are refused.
	ControllerServiceAccount string
	// RunnerFence is how long after this manager begins to lead it leaves alone the locks of runs
	// on runner pools that an earlier manager started: the runner's lease plus the fence grace
	// (runners.DispatcherOptions), by when such a run has stopped. Zero: no wait.
	RunnerFence time.Duration
	// LeaderFence is how long after this manager begins to lead it leaves alone the locks of
	// in-process runs an earlier manager started: the leader election's renew deadline, past which
	// that manager's state server refuses its runs (their credentials have lapsed), so none of
	// them can write once their lock is recovered. Zero: no wait (no leader election).
	LeaderFence time.Duration
	// State says where state Secrets live.
	State statebackend.Config
	// StateServer serves state to runs (Terraform's http backend) from State.Namespace; nil makes
	// runs use Terraform's kubernetes backend on the same Secrets.
	StateServer *statebackend.Server
	// RunCluster is the API server runs granted kubernetesAccess talk to.
	RunCluster secrets.RunCluster
	// Identity names this controller's runs (lock holder and pod).
	Identity RunIdentity
	// SyncInterval is how often an unchanged resource is planned again (DefaultSyncInterval when zero).
	SyncInterval time.Duration
	// SecretCheckInterval is how often an applied resource's Secret inputs are read to notice a
	// rotation (DefaultSecretCheckInterval when zero).
	SecretCheckInterval time.Duration
	// MaxConcurrentReconciles bounds parallel reconciles (1 when zero).
	MaxConcurrentReconciles int
	// MaxConcurrentDriftChecks bounds the drift checks running at once (1 when zero), so that they
	// take at most that share of the runner pool.
	MaxConcurrentDriftChecks int
	// StaleLockAfter is how long a lock held by anyone but a live run of this deployment is held
	// before status reports it as stale (state.DefaultStaleLockAfter when zero).
	StaleLockAfter time.Duration
	// SharedGrace is how long a shared resource being deleted waits after a claim's last join
	// (provision.SharedGrace when zero): the sharing reconciler's grace, which it must equal.
	SharedGrace time.Duration
	// Shard, when set, is this replica's share of the resources (sharding): a resource is
	// reconciled only while its bucket is held here (Shard.Enter), its fences count from when this
	// replica took the bucket, and the controller runs on every replica, not on the leader alone.
	// Nil: the leader reconciles every resource.
	Shard Shard
	// KeepRunLogs keeps every run's log in its Secret; when false only the logs people need are
	// written (keepRunLog): failed runs, plans waiting for approval, drift found.
	KeepRunLogs bool
}

// Reconciler keeps InfraResources' finalizers, phases, Terraform runs and reclaim. It is made by
// New; the zero value is not usable.
type Reconciler struct {
	// Client is Options.Client: the cache-backed client the phases read and write with.
	client.Client
	// opts are the options New was given; the parts hold what they use of them.
	opts Options
	// built are the collaborators (parts.go), made by New.
	built *parts
	// shardEvents wakes the resources of buckets taken (BucketsTaken); nil without sharding.
	shardEvents chan event.GenericEvent
}

// +kubebuilder:rbac:groups=conductor.io,resources=infraresources,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources/finalizers,verbs=update
// +kubebuilder:rbac:groups=conductor.io,resources=infraclaims,verbs=get;list;watch
// Secrets anywhere: Secret inputs (variablesFrom, env) are read from the namespace their reference
// names, and connection Secrets are written in the claims' namespaces. Secrets are never cached,
// so no list or watch is needed cluster-wide. State (Secrets and lock Leases) is kept only in the
// controller's namespace, which is the only place it may list and delete them.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update;patch
// +kubebuilder:rbac:groups="",namespace=conductor-system,resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=conductor-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Tokens for runs (kubernetesAccess), only of ServiceAccounts in the controller's namespace.
// +kubebuilder:rbac:groups="",namespace=conductor-system,resources=serviceaccounts/token,verbs=create

// Reconcile syncs one resource: the phases below in order, over one scope, then one status write.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx, release := r.opts.Drain.Detach(ctx)
	defer release()
	leave, handover, lost, ok := r.enterShard(req.Name)
	if !ok {
		return ctrl.Result{}, nil // another replica's share, or one handed over: its owner reconciles it
	}
	defer leave()
	ctx, unwatch := untilLost(ctx, lost)
	defer unwatch()
	r.parts().fence.LeadingSince()
	s, err := r.openScope(ctx, req.NamespacedName)
	if s == nil || err != nil {
		return ctrl.Result{}, err
	}
	s.handover, s.lost = handover, lost
	prov := r.parts().provision
	if !s.res.DeletionTimestamp.IsZero() {
		return runPhases(ctx, s, prov.reclaimPhases()...) // the reclaim (reclaim.go)
	}
	phases := []resourcePhase{
		r.addFinalizers,  // FinalizerResource and FinalizerInUse, before anything else
		r.upgradeModule,  // UpgradeAvailable, and upgradePolicy Automatic (upgrade.go)
		r.observeBinding, // the claim, and the phase it gives (as syncVolume)
	}
	// Then the provisioner's: reclaim a Released resource, name the state, and the run phases
	// (provisioner.go).
	return runPhases(ctx, s, append(phases, prov.phases()...)...)
}

// addFinalizers adds the reclaim and in-use finalizers (one update, when either is missing).
func (r *Reconciler) addFinalizers(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	res := s.res
	if added := controllerutil.AddFinalizer(res, v1alpha1.FinalizerResource); controllerutil.AddFinalizer(res, v1alpha1.FinalizerInUse) || added {
		if err := r.Update(ctx, res); err != nil {
			return ctrl.Result{}, err
		}
		s.base = res.DeepCopy() // the object as stored now, status included
	}
	return ctrl.Result{}, nil
}

// upgradeModule records whether the class offers a newer module version, and upgrades a resource
// whose class asks for automatic upgrades: its new generation then plans and applies.
// An upgrade ends the reconcile: the new generation's own reconcile (a watch event) runs it.
func (r *Reconciler) upgradeModule(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	class, err := r.observeUpgrade(ctx, s.res)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.class = class
	if upgraded, err := r.upgradeAutomatically(ctx, s.res, s.class); upgraded || err != nil {
		return s.end(ctrl.Result{}), err
	}
	return ctrl.Result{}, nil
}

// observeBinding reads the claim the resource names and the phase it gives the resource.
func (r *Reconciler) observeBinding(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	claim, err := observeClaim(ctx, r.Client, r.opts.APIReader, s.res)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.claim, s.phase = claim, bindingPhase(s.res, claim)
	return ctrl.Result{}, nil
}

// claimState is what the resource controller observed of the claim a resource names.
type claimState int

const (
	claimNone     claimState = iota // no claimRef
	claimLive                       // bound: the claim exists, with the claimRef's UID
	claimGone                       // bound, and the claim is not found, released by the claim controller after its deletion, or of another UID
	claimReserved                   // pre-bound by name (no UID): a reservation, not a bind
)

// observeClaim reads the claim res's claimRef names, with c (the cache), and says what it found
// (claimState). A claim the cache does not have, or has with another UID, is read again with live
// (the API server; nil: not read again) before it is called gone: the claim controller that
// created the resource may run in another process (sharding: another replica), whose claim the
// cache here has not seen yet, and a resource found Released is deleted.
func observeClaim(ctx context.Context, c, live client.Reader, res *v1alpha1.InfraResource) (claimState, error) {
	ref := res.Spec.ClaimRef
	if ref == nil {
		return claimNone, nil
	}
	if ref.UID == "" {
		// pv_controller.go syncVolume: "volume is pre-bound to claim" — it stays Available
		// whatever becomes of a claim of that name until the bind sets the UID.
		return claimReserved, nil
	}
	key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
	claim := &v1alpha1.InfraClaim{}
	err := c.Get(ctx, key, claim)
	if live != nil && (apierrors.IsNotFound(err) || (err == nil && claim.UID != ref.UID)) {
		claim = &v1alpha1.InfraClaim{}
		err = live.Get(ctx, key, claim)
	}
	switch {
	case apierrors.IsNotFound(err):
		return claimGone, nil
	case err != nil:
		return claimNone, err
	case claim.UID != ref.UID:
		return claimGone, nil
	case !claim.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(claim, v1alpha1.FinalizerClaim):
		// A deleted claim is gone once the claim controller released it (its finalizer removed,
		// at once unless other claims read it: their resources are reclaimed first). Until then
		// the resource stays Bound: the infrastructure they read is still in use.
		return claimGone, nil
	}
	return claimLive, nil
}

// bindingPhase is the phase a resource's claim gives it (mirrors syncVolume): Released is kept
// once reached, as a released PV is never bound again without an admin clearing its claimRef.
func bindingPhase(res *v1alpha1.InfraResource, claim claimState) v1alpha1.ResourcePhase {
	switch {
	case res.Status.Phase == v1alpha1.ResourceReleased && res.Spec.ClaimRef != nil:
		return v1alpha1.ResourceReleased
	case claim == claimNone, claim == claimReserved:
		return v1alpha1.ResourceAvailable
	case claim == claimLive:
		return v1alpha1.ResourceBound
	default:
		return v1alpha1.ResourceReleased
	}
}

// SetupWithManager registers the controller: resources, and the claims they name.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := shared.SetupIndexes(context.Background(), mgr); err != nil {
		return err
	}
	workers := r.opts.MaxConcurrentReconciles
	if workers < 1 {
		workers = 1
	}
	opts := controller.Options{
		MaxConcurrentReconciles: workers,
		// A failed Terraform run is retried after 1 s, doubling up to 5 min: not at the
		// default's 5 ms, which would re-run a failing apply several times a second at first.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](FailureBackoffBase, FailureBackoffMax),
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.opts.Shard != nil {
		// Every replica reconciles its share; the buckets it takes wake their resources.
		opts.NeedLeaderElection = ptr.To(false)
		b = b.WatchesRawSource(source.Channel(r.shardEvents, &handler.EnqueueRequestForObject{}))
	}
	b, err := r.parts().provision.watch(mgr, b)
	if err != nil {
		return err
	}
	return b.
		// Status writes do not wake the resource up again: a failed run is retried by the work
		// queue's backoff, not by its own status patch.
		For(&v1alpha1.InfraResource{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&v1alpha1.InfraClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			// The resource the claim names, and the one provisioned for it (pre-bound, in case the
			// claim's resourceName was never written).
			claim := o.(*v1alpha1.InfraClaim)
			reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: provision.ResourceName(claim)}}}
			if name := provision.BoundName(claim); name != "" && name != provision.ResourceName(claim) {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
			}
			return reqs
		})).
		// A class's new module version is told to the resources it provisioned (UpgradeAvailable).
		Watches(&v1alpha1.InfraClass{}, handler.EnqueueRequestsFromMapFunc(r.resourcesOfClass),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(opts).
		Named("infraresource").
		Complete(r)
}

// resumedRuns is the source of the keys Runs.Resumed delivers (nil: none): each is queued, so
// that the resource reconciles now and attaches to its adopted run (attachRun). It reads until
// the controller stops.
func resumedRuns(keys <-chan string) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case key := <-keys:
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: key}})
				}
			}
		}()
		return nil
	})
}
