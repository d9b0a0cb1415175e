// Claim binding.
//
// This file binds InfraClaims to InfraResources the way the PersistentVolume controller binds PVCs
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
//   - Deleting a claim releases its resource (status phase Released, claimRef kept, as a PV); the
//     resource controller then carries out the reclaim policy. The claim's finalizer makes sure the
//     release is not skipped.
//   - A bound claim whose resource is gone is Lost, as a PVC whose PV was deleted.
//
// Every branch below says what it observed. Tests: internal/scheduler (matching, table tests) and
// claim_test.go (envtest: static, pre-bound, dynamic, release, lost, race).
package claim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/keymutex"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
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

	limitLocks keymutex.KeyMutex // set by SetupWithManager; see lockLimits
}

// +kubebuilder:rbac:groups=conductor.io,resources=infraclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraclasses,verbs=get;list;watch
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
		return shared.RequeueOnConflict(ctrl.Result{}, r.release(ctx, claim))
	}
	before := claim.DeepCopy()
	result, err := r.sync(ctx, claim)
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

// sync decides and performs the next binding step; it sets the claim's status in memory.
func (r *Reconciler) sync(ctx context.Context, claim *v1alpha1.InfraClaim) (ctrl.Result, error) {
	if claim.Spec.ResourceName != "" {
		return r.syncNamed(ctx, claim)
	}
	matcher, err := scheduler.NewMatcher(claim)
	if err != nil {
		// Claim Pending, a request, requirement or selector does not parse: nothing to do until
		// the spec changes.
		setPending(claim, reasonOf(err), err.Error())
		return ctrl.Result{}, nil
	}
	nsLabels, err := r.namespaceLabels(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	classes := &v1alpha1.InfraClassList{}
	if err := r.List(ctx, classes); err != nil {
		return ctrl.Result{}, err
	}
	matcher.InNamespace(nsLabels).WithClasses(classes.Items)
	resources := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, resources, client.MatchingFields{shared.IndexResourceKind: claim.Spec.ResourceKind}); err != nil {
		return ctrl.Result{}, err
	}
	if res := matcher.Best(resources.Items); res != nil {
		// Claim Pending, resource Available (or pre-bound to this claim): bind.
		return r.bind(ctx, claim, res)
	}
	class, err := scheduler.SelectClass(claim, classes.Items)
	if err != nil {
		// Claim Pending, class missing, of another kind, or ambiguous.
		setPending(claim, reasonOf(err), err.Error())
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	if class == nil {
		// Claim Pending, nothing matches and no class applies: wait for a resource or a class.
		setPending(claim, v1alpha1.ReasonNoMatchingResource, fmt.Sprintf(
			"no Available %s resource matches the claim and no class applies (name one in spec.className or mark one default)",
			claim.Spec.ResourceKind))
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	if !scheduler.AllowsNamespace(class.Spec.AllowedNamespaces, nsLabels) {
		// Claim Pending, the class is not offered to this namespace: nothing is provisioned.
		setPending(claim, v1alpha1.ReasonClassNotAllowed, fmt.Sprintf("class %s is not offered to namespace %s (its allowedNamespaces)", class.Name, claim.Namespace))
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	// Checked and provisioned under the class's and namespace's lock: two claims at once cannot
	// both take the last place. It is released once the resource exists (before binding).
	unlock := func() {}
	if hasLimits(class) {
		unlock = sync.OnceFunc(r.lockLimits(class.Name, claim.Namespace))
	}
	defer unlock()
	if msg, err := r.overLimits(ctx, claim, class); err != nil || msg != "" {
		// Claim Pending, provisioning would take the namespace over the class's limits.
		if msg != "" {
			setPending(claim, v1alpha1.ReasonClassLimitReached, msg)
		}
		return ctrl.Result{RequeueAfter: PendingResync}, err
	}
	// Claim Pending, a class applies: provision a resource pre-bound to the claim.
	return r.provision(ctx, claim, class, unlock)
}

// syncNamed handles a claim that names its resource: statically pre-bound by the user, or bound.
func (r *Reconciler) syncNamed(ctx context.Context, claim *v1alpha1.InfraClaim) (ctrl.Result, error) {
	res := &v1alpha1.InfraResource{}
	err := r.Get(ctx, types.NamespacedName{Name: claim.Spec.ResourceName}, res)
	switch {
	case apierrors.IsNotFound(err) && wasBound(claim):
		// Claim Bound, resource gone: Lost, as a PVC whose PV was deleted.
		setLost(claim, fmt.Sprintf("bound resource %s no longer exists", claim.Spec.ResourceName))
		return ctrl.Result{}, nil
	case apierrors.IsNotFound(err):
		// Claim Pending, named resource does not exist (yet).
		setPending(claim, v1alpha1.ReasonResourceNotFound, fmt.Sprintf("resource %s does not exist", claim.Spec.ResourceName))
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	if res.Spec.ClaimRef != nil && !scheduler.IsPreBoundTo(res, claim) {
		if wasBound(claim) {
			// Claim Bound, resource now bound to another claim: Lost.
			setLost(claim, fmt.Sprintf("resource %s is now bound to a different claim", res.Name))
			return ctrl.Result{}, nil
		}
		// Claim Pending, named resource bound to another claim.
		// Named only by the PV controller's words: the other claim may be another namespace's.
		setPending(claim, v1alpha1.ReasonResourceBoundToOtherClaim, fmt.Sprintf("resource %s is bound or reserved to a different claim", res.Name))
		if ref := res.Spec.ClaimRef; ref.Namespace != claim.Namespace {
			// The resource's own events say who asked, for the platform team.
			r.Recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonResourceBoundToOtherClaim, "Bind",
				"claim %s/%s names this resource, which is bound or reserved to claim %s/%s", claim.Namespace, claim.Name, ref.Namespace, ref.Name)
		}
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	nsLabels, err := r.namespaceLabels(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !wasBound(claim) {
		if msg, err := r.notOffered(ctx, res, claim.Namespace, nsLabels); err != nil || msg != "" {
			// Claim Pending, named resource (or its class) not offered to this namespace.
			if err == nil {
				setPending(claim, v1alpha1.ReasonResourceNotAllowed, msg)
			}
			return ctrl.Result{RequeueAfter: PendingResync}, err
		}
	}
	if res.Spec.ClaimRef == nil {
		// Claim Pending, named resource free: it must fit the claim.
		if err := scheduler.CheckStaticBinding(claim, res); err != nil {
			setPending(claim, reasonOf(err), err.Error())
			return ctrl.Result{RequeueAfter: PendingResync}, nil
		}
	}
	return r.bind(ctx, claim, res)
}

// bind writes the resource's claimRef (skipped when it already names this claim with its UID), then
// the claim's resourceName and its finalizer in one update (skipped when both are there), then sets
// the Bound status. A claim gets its finalizer only here: until it names a resource there is
// nothing to release, and a claim deleted between the two writes leaves a resource whose claim is
// gone, which the resource controller finds Released (as the PV controller's syncVolume would).
func (r *Reconciler) bind(ctx context.Context, claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) (ctrl.Result, error) {
	if ref := res.Spec.ClaimRef; ref == nil || ref.UID != claim.UID {
		res = res.DeepCopy()
		res.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
		// Update carries the resourceVersion the match was made on: a concurrent bind conflicts.
		if err := r.Update(ctx, res); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				setPending(claim, v1alpha1.ReasonWaitingForResource, fmt.Sprintf("resource %s changed while binding; retrying", res.Name))
				return ctrl.Result{RequeueAfter: shared.RetryDelay()}, nil
			}
			return ctrl.Result{}, fmt.Errorf("binding resource %s: %w", res.Name, err)
		}
	}
	if claim.Spec.ResourceName != res.Name || !controllerutil.ContainsFinalizer(claim, v1alpha1.FinalizerClaim) {
		claim.Spec.ResourceName = res.Name
		controllerutil.AddFinalizer(claim, v1alpha1.FinalizerClaim)
		status := claim.Status
		if err := r.Update(ctx, claim); err != nil {
			return ctrl.Result{}, fmt.Errorf("binding claim to %s: %w", res.Name, err)
		}
		claim.Status = status
	}
	if err := r.rerender(ctx, claim, res); err != nil {
		return ctrl.Result{}, err
	}
	prevReady := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionReady).DeepCopy()
	setBound(claim, res)
	setChangePending(claim, res)
	again, err := r.checkConnectionSecret(ctx, claim, res)
	keepTransitionTime(claim.Status.Conditions, prevReady)
	return ctrl.Result{RequeueAfter: again}, err
}

// provision creates a resource from the class, pre-bound to the claim, then binds it. created is
// called once the resource exists, before binding (it releases the class limits' lock).
func (r *Reconciler) provision(ctx context.Context, claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, created func()) (ctrl.Result, error) {
	if c := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		// Claim Pending, class broken: do not provision from it.
		setPending(claim, v1alpha1.ReasonProvisioningFailed, fmt.Sprintf("class %s is not ready: %s", class.Name, c.Message))
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	names := provision.ResourceNames(claim)
	for _, name := range names {
		// Rendered per name: templates see the resource's name (resource.name).
		res, err := provision.ResourceFromClass(claim, class, name)
		if err != nil {
			setPending(claim, v1alpha1.ReasonProvisioningFailed, err.Error())
			return ctrl.Result{}, nil
		}
		err = r.Create(ctx, res)
		if err == nil {
			created()
			r.Recorder.Eventf(claim, res, corev1.EventTypeNormal, v1alpha1.ReasonProvisioning, "Provision",
				"provisioning resource %s from class %s (module %s@%s), bound to this claim", res.Name, class.Name, class.Spec.Module.Source, class.Spec.Module.Version)
			return r.bind(ctx, claim, res)
		}
		if !apierrors.IsAlreadyExists(err) {
			setPending(claim, v1alpha1.ReasonProvisioningFailed, fmt.Sprintf("creating resource %s: %v", res.Name, err))
			return ctrl.Result{}, err
		}
		// Created by an earlier reconcile whose claim write did not happen: bind to it. Another
		// claim's resource of that name: the next name.
		existing := &v1alpha1.InfraResource{}
		if err := r.Get(ctx, client.ObjectKeyFromObject(res), existing); err != nil {
			return ctrl.Result{}, err
		}
		if scheduler.IsPreBoundTo(existing, claim) {
			return r.bind(ctx, claim, existing)
		}
	}
	setPending(claim, v1alpha1.ReasonProvisioningFailed, fmt.Sprintf("resources %s exist and are not pre-bound to this claim", strings.Join(names, ", ")))
	return ctrl.Result{RequeueAfter: PendingResync}, nil
}

// release marks the claim's resource Released and removes the claim's finalizer.
func (r *Reconciler) release(ctx context.Context, claim *v1alpha1.InfraClaim) error {
	if !controllerutil.ContainsFinalizer(claim, v1alpha1.FinalizerClaim) {
		return nil
	}
	if name := provision.BoundName(claim); name != "" {
		res := &v1alpha1.InfraResource{}
		err := r.Get(ctx, types.NamespacedName{Name: name}, res)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil && provision.IsBoundPair(res, claim) && res.Status.Phase != v1alpha1.ResourceReleased {
			// Claim deleted, resource bound to it (UID match; a reservation without a UID is not a
			// bind, as in the PV controller): the resource controller, which alone writes the
			// resource's status, finds the claim gone (Released) and reclaims.
			r.Recorder.Eventf(res, claim, corev1.EventTypeNormal, v1alpha1.ReasonReleased, "Release",
				"claim %s/%s deleted; reclaim policy %s", claim.Namespace, claim.Name, res.Spec.ReclaimPolicy)
		}
	}
	controllerutil.RemoveFinalizer(claim, v1alpha1.FinalizerClaim)
	return client.IgnoreNotFound(r.Update(ctx, claim))
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

func wasBound(claim *v1alpha1.InfraClaim) bool {
	return claim.Status.Phase == v1alpha1.ClaimBound || claim.Status.Phase == v1alpha1.ClaimLost
}

// reasonOf returns the condition reason of a scheduler decision, or ProvisioningFailed.
func reasonOf(err error) string {
	var se *scheduler.Error
	if errors.As(err, &se) {
		return se.Reason
	}
	return v1alpha1.ReasonProvisioningFailed
}

// SetupWithManager registers the controller, its indexes and its watches: claims; resources (the
// claim they name, and for an Available free resource every Pending claim of its kind); classes
// (every Pending claim of their kind).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.limitLocks = keymutex.NewHashed(0)
	if err := shared.SetupIndexes(context.Background(), mgr); err != nil {
		return err
	}
	workers := r.MaxConcurrentReconciles
	if workers < 1 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.InfraClaim{}).
		Watches(&v1alpha1.InfraResource{}, handler.EnqueueRequestsFromMapFunc(r.claimsForResource)).
		Watches(&v1alpha1.InfraClass{}, handler.EnqueueRequestsFromMapFunc(r.claimsForClass),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, classReadinessChanged()))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("infraclaim").
		Complete(r)
}

// classReadinessChanged passes the updates of a class whose Ready condition changed status: a
// class turning Ready (its module checked, which happens after the spec change that the generation
// predicate sees) wakes its Pending claims at once rather than at their next PendingResync.
func classReadinessChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*v1alpha1.InfraClass)
		after, ok2 := e.ObjectNew.(*v1alpha1.InfraClass)
		if !ok1 || !ok2 {
			return false
		}
		return readyStatus(before.Status.Conditions) != readyStatus(after.Status.Conditions)
	}}
}

// readyStatus is the status of the Ready condition, "" when there is none.
func readyStatus(conds []metav1.Condition) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady); c != nil {
		return c.Status
	}
	return ""
}

func (r *Reconciler) claimsForResource(ctx context.Context, obj client.Object) []reconcile.Request {
	res, ok := obj.(*v1alpha1.InfraResource)
	if !ok {
		return nil
	}
	if ref := res.Spec.ClaimRef; ref != nil {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}}
	}
	if res.Status.Phase != v1alpha1.ResourceAvailable {
		return nil
	}
	return r.pendingClaims(ctx, res.Spec.ResourceKind)
}

func (r *Reconciler) claimsForClass(ctx context.Context, obj client.Object) []reconcile.Request {
	class, ok := obj.(*v1alpha1.InfraClass)
	if !ok {
		return nil
	}
	return r.pendingClaims(ctx, class.Spec.ResourceKind)
}

// pendingClaims lists the unbound claims of a kind, from the cache.
func (r *Reconciler) pendingClaims(ctx context.Context, kind string) []reconcile.Request {
	claims := &v1alpha1.InfraClaimList{}
	if err := r.List(ctx, claims, client.MatchingFields{shared.IndexClaimKind: kind}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range claims.Items {
		if c := &claims.Items[i]; c.Spec.ResourceName == "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return out
}
