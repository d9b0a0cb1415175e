// Package claim binds InfraClaims to InfraResources the way the PersistentVolume controller binds PVCs
// to PVs (pkg/controller/volume/persistentvolume/pv_controller.go):
//
//   - A claim names its resource in spec.resourceName once bound, as a PVC names its volume in
//     spec.volumeName; a resource names its claim in spec.claimRef, as a PV does.
//   - The bind writes the resource first (spec.claimRef, an Update carrying the resourceVersion the
//     decision was made on, so two claims can never both win one resource), then the claim
//     (spec.resourceName), then the claim's status. Each write is skipped when already done, so a
//     crash after any write is finished by the next reconcile: a resource pre-bound to a claim
//     always wins that claim's next match.
//   - A claim no Available resource satisfies gets a new resource from its class (named, else the
//     default of its kind), pre-bound to it; the next step binds them as above.
//   - Deleting a claim releases its resource (claimRef kept, as a PV): the resource controller finds
//     the claim gone, marks the resource Released and carries out the reclaim policy. The claim's
//     finalizer makes sure the release is not skipped.
//   - A bound claim whose resource is gone is Lost, as a PVC whose PV was deleted.
//
// Every branch of the binding steps (bind.go) says what it observed. Tests: internal/scheduler
// (matching, table tests) and claim_test.go (envtest: static, pre-bound, dynamic, release, lost,
// race).
package claim

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/keymutex"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
)

// PendingResync is how often a Pending claim is matched again even when no watched object changed,
// as the PV controller's periodic resync.
const PendingResync = time.Minute

// Reconciler binds InfraClaims to InfraResources and provisions resources from classes.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
	// MaxConcurrentReconciles bounds parallel reconciles (1 when zero).
	MaxConcurrentReconciles int
	// Ready, when set, observes each claim's creation → first Ready (conductor_tf_claim_ready_seconds).
	Ready *metrics.ClaimReady
	// APIReader, when set, reads what class limits count from the API server rather than the
	// cache (the manager's uncached reader); required for the limits to hold under concurrency.
	APIReader client.Reader
	// ConnectionSecretCheck is how often a bound claim reads its connection Secret
	// (DefaultConnectionSecretCheck when zero).
	ConnectionSecretCheck time.Duration

	// Namespace is the controller's namespace: where shared resources write their connection
	// Secrets (shares.go).
	Namespace string
	// SharedJoinRefresh is how often a claim that waits for a shared resource marks its join again
	// (provision.SharedJoinRefresh when zero); it must stay well within the sharing reconciler's
	// grace.
	SharedJoinRefresh time.Duration

	limitLocks  keymutex.KeyMutex // set by SetupWithManager; see lockLimits
	sharedLocks keymutex.KeyMutex // a sharing class's places (shares.go); taken after limitLocks, never before
}

// Delete: a claim whose lifetime ended is deleted (lifetime.go).
// +kubebuilder:rbac:groups=conductor.io,resources=infraclaims,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=conductor.io,resources=infraclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=conductor.io,resources=infraoutputgrants,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile syncs one claim: finalizer, then deletion or binding, then one status patch (none
// when the status is unchanged).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &v1alpha1.InfraClaim{}
	if err := r.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !claim.DeletionTimestamp.IsZero() {
		if r.Ready != nil {
			r.Ready.Forget(claim.UID)
		}
		if held, err := r.holdForReaders(ctx, claim); held || err != nil {
			return shared.RequeueOnConflict(ctrl.Result{}, err)
		}
		return shared.RequeueOnConflict(ctrl.Result{}, r.release(ctx, claim))
	}
	before := claim.DeepCopy()
	gone, wait, err := r.expire(ctx, claim, time.Now())
	if gone || err != nil {
		return shared.RequeueOnConflict(ctrl.Result{}, err)
	}
	var result ctrl.Result
	held, err := r.observeInputs(ctx, claim)
	switch {
	case err != nil:
	case held != nil && claim.Spec.ResourceName == "":
		// Claim Pending, a claim it reads is missing, not Ready, not granted or in a cycle:
		// nothing is provisioned or bound until every value is there (a change of the upstream
		// wakes it: IndexClaimUpstreams).
		setPending(claim, held.reason, held.message)
	default:
		result, err = r.sync(ctx, claim)
	}
	result.RequeueAfter = sooner(result.RequeueAfter, wait)
	claim.Status.ObservedGeneration = claim.Generation
	// Most reconciles (a bound resource's status changed) change nothing here: no write.
	_, perr := shared.PatchStatus(ctx, r.Client, claim, before)
	perr = client.IgnoreNotFound(perr)
	if perr != nil {
		err = errors.Join(err, perr)
	}
	r.recordTransition(before, claim)
	if r.Ready != nil && perr == nil && becameReady(before, claim) {
		r.Ready.Observe(claim, time.Now())
	}
	return shared.RequeueOnConflict(result, err)
}

// recordTransition emits an event when the Bound condition changed reason, so a user sees each
// outcome once rather than at every resync. A claim provisioned and bound in one reconcile has
// its Provisioning event (which names the resource it is bound to) and no Bound event besides.
func (r *Reconciler) recordTransition(before, after *v1alpha1.InfraClaim) {
	old := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConditionBound)
	now := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.ConditionBound)
	if now == nil || (old != nil && old.Reason == now.Reason && old.Message == now.Message) {
		return
	}
	if now.Reason == v1alpha1.ReasonWaitingForResource {
		return // a lost race, retried at once: not news
	}
	if old == nil && now.Status == metav1.ConditionTrue && after.Status.ResourceName == provision.ResourceName(after) {
		return // provisioned and bound in one reconcile: the Provisioning event told it
	}
	kind := corev1.EventTypeNormal
	if now.Status != metav1.ConditionTrue && now.Reason != v1alpha1.ReasonNoMatchingResource {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(after, nil, kind, now.Reason, "Bind", "%s", now.Message)
}

// becameReady reports a claim whose Ready condition has just turned True.
func becameReady(before, after *v1alpha1.InfraClaim) bool {
	return !meta.IsStatusConditionTrue(before.Status.Conditions, v1alpha1.ConditionReady) &&
		meta.IsStatusConditionTrue(after.Status.Conditions, v1alpha1.ConditionReady)
}

// SetupWithManager registers the controller, its indexes and its watches: claims; resources (the
// claim they name, and for an Available free resource every Pending claim of its kind); classes
// (every Pending claim of their kind).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.limitLocks = keymutex.NewHashed(0)
	r.sharedLocks = keymutex.NewHashed(0)
	if err := shared.SetupIndexes(context.Background(), mgr); err != nil {
		return err
	}
	workers := r.MaxConcurrentReconciles
	if workers < 1 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.InfraClaim{}).
		// A claim's change wakes the claims that read it and those it reads (inputs, readBy).
		Watches(&v1alpha1.InfraClaim{}, handler.EnqueueRequestsFromMapFunc(r.relatedClaims)).
		Watches(&v1alpha1.InfraOutputGrant{}, handler.EnqueueRequestsFromMapFunc(r.claimsForGrant)).
		Watches(&v1alpha1.InfraResource{}, handler.EnqueueRequestsFromMapFunc(r.claimsForResource)).
		Watches(&v1alpha1.InfraClass{}, handler.EnqueueRequestsFromMapFunc(r.claimsForClass),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, classReadinessChanged()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("infraclaim").
		Complete(r)
}
