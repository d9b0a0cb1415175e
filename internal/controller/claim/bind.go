package claim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// The binding steps, as the PV controller's syncUnboundClaim and syncBoundClaim: match or
// provision, bind, release.

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
	ns, err := r.namespaceOf(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	classes := &v1alpha1.InfraClassList{}
	if err := r.List(ctx, classes); err != nil {
		return ctrl.Result{}, err
	}
	matcher.InNamespace(ns.Labels).WithClasses(classes.Items)
	// Checked and provisioned or bound under the namespace's lock (lockFor), taken here when the
	// namespace has a budget or the claim spreads, else once a class with limits is in play. Two
	// claims at once cannot both take the last place, or the same emptiest zone. bind releases it
	// once the bind is written; at most one lock is held at a time.
	counts := r.newCounting(claim, ns, classes.Items)
	// Taken once, and held until bind releases it (or the reconcile ends): what counts reads under
	// it stays true until the bind is written.
	unlock, locked := r.lockFor(claim, nil, ns)
	lockFor := func(class *v1alpha1.InfraClass) {
		if !locked {
			unlock, locked = r.lockFor(claim, class, ns)
		}
	}
	defer func() { unlock() }()
	if sp := spreadOf(claim); sp != nil {
		load, msg, err := r.spreadLoad(ctx, claim, sp)
		if err != nil || msg != "" {
			// Claim Pending, its spread's selector does not parse.
			if msg != "" {
				setPending(claim, v1alpha1.ReasonInvalidRequirement, msg)
			}
			return ctrl.Result{}, err
		}
		matcher.Spread(sp.TopologyKey, load)
	}
	candidates, err := r.bindingCandidates(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	overSpent := ""
	for res := matcher.Best(candidates); res != nil; res = matcher.Best(candidates) {
		if !scheduler.IsPreBoundTo(res, claim) {
			if res.Spec.ClassRef != nil {
				lockFor(counts.classes[res.Spec.ClassRef.Name])
			}
			msg, err := counts.overSpendBinding(ctx, res)
			if err != nil {
				return ctrl.Result{}, err
			}
			if msg != "" {
				// Binding it would take the namespace over a spend limit: the next best, if any.
				overSpent, candidates = msg, without(candidates, res.Name)
				continue
			}
		}
		// Claim Pending, resource Available (or pre-bound to this claim): bind.
		return r.bind(ctx, claim, res, unlock)
	}
	choice, err := matcher.ChooseClass(classes.Items)
	if choice == nil && err == nil && overSpent != "" {
		// Claim Pending, every resource that fits would take the namespace over a spend limit,
		// and no class applies.
		setPending(claim, v1alpha1.ReasonSpendLimitReached, overSpent)
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	if err != nil {
		// Claim Pending, class missing, of another kind, or ambiguous; or, scheduled by cost or
		// zone, no class fits.
		setPending(claim, reasonOf(err), err.Error())
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	if choice == nil {
		// Claim Pending, nothing matches and no class applies: wait for a resource or a class.
		setPending(claim, v1alpha1.ReasonNoMatchingResource, fmt.Sprintf(
			"no Available %s resource matches the claim and no class applies (name one in spec.className or mark one default)",
			claim.Spec.ResourceKind))
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	class := choice.Class
	if !scheduler.AllowsNamespace(class.Spec.AllowedNamespaces, ns.Labels) {
		// Claim Pending, the class is not offered to this namespace: nothing is provisioned.
		setPending(claim, v1alpha1.ReasonClassNotAllowed, fmt.Sprintf("class %s is not offered to namespace %s (its allowedNamespaces)", class.Name, claim.Namespace))
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	lockFor(class) // the namespace's lock, when the class has limits
	if reason, msg, err := counts.overLimits(ctx, class); err != nil || msg != "" {
		// Claim Pending, provisioning would take the namespace over the class's limits or its
		// spend budget.
		if msg != "" {
			setPending(claim, reason, msg)
		}
		return ctrl.Result{RequeueAfter: PendingResync}, err
	}
	if claim.Spec.Scheduling != nil {
		r.Recorder.Eventf(claim, class, corev1.EventTypeNormal, v1alpha1.ReasonClassChosen, "Schedule", "chose %s", choice.Why())
	}
	if res, err := r.takeFromPool(ctx, claim, class); err != nil || res != nil {
		// Claim Pending, a ready resource of the class's pool is now bound to it: bind the claim.
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.bind(ctx, claim, res, unlock)
	}
	// Claim Pending, a class applies: provision a resource pre-bound to the claim.
	return r.provision(ctx, claim, class, func() { unlock() })
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
	return r.bind(ctx, claim, res, func() {})
}

// bind writes the resource's claimRef (skipped when it already names this claim with its UID) and
// labels it with the claim's namespace (what the namespace's limits and budget count), then the
// claim's resourceName and its finalizer in one update (skipped when both are there), then calls
// release (the namespace's lock, once what it guarded is written; before rerender, which may take
// it again), then sets the Bound status. A claim gets its finalizer only here: until it names a resource there is
// nothing to release, and a claim deleted between the two writes leaves a resource whose claim is
// gone, which the resource controller finds Released (as the PV controller's syncVolume would).
func (r *Reconciler) bind(ctx context.Context, claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource, release func()) (ctrl.Result, error) {
	defer release()
	if ref := res.Spec.ClaimRef; ref != nil && ref.UID == claim.UID && res.Labels[v1alpha1.LabelClaimNamespace] != claim.Namespace {
		// Bound before binds labelled: the labels alone, with no precondition (a conflict must not
		// turn a bound claim Pending).
		labelled := res.DeepCopy()
		labelClaim(labelled, claim)
		if err := r.Patch(ctx, labelled, client.MergeFrom(res)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("labelling resource %s with its claim: %w", res.Name, err)
		}
	}
	if ref := res.Spec.ClaimRef; ref == nil || ref.UID != claim.UID {
		res = res.DeepCopy()
		res.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
		labelClaim(res, claim)
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
	release()
	if err := r.rerender(ctx, claim, res); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.followShared(ctx, claim, res); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.poolTakeApplied(ctx, claim, res); err != nil {
		return ctrl.Result{}, err
	}
	prevReady := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionReady).DeepCopy()
	setBound(claim, res)
	setChangePending(claim, res)
	if err := r.setCost(ctx, claim, res); err != nil {
		return ctrl.Result{}, err
	}
	again, err := r.checkConnectionSecret(ctx, claim, res)
	keepTransitionTime(claim.Status.Conditions, prevReady)
	return ctrl.Result{RequeueAfter: again}, err
}

// provision creates a resource from the class, pre-bound to the claim, then binds it. created is
// bind's release (the namespace's lock, released once the bind is written).
func (r *Reconciler) provision(ctx context.Context, claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, created func()) (ctrl.Result, error) {
	if c := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		// Claim Pending, class broken: do not provision from it.
		setPending(claim, v1alpha1.ReasonProvisioningFailed, fmt.Sprintf("class %s is not ready: %s", class.Name, c.Message))
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	if len(claim.Spec.ParametersFrom) > 0 && !meta.IsStatusConditionTrue(class.Status.Conditions, v1alpha1.ConditionReady) {
		// Claim Pending, it reads other claims and its class's module has not been checked yet:
		// which inputs pass to which module variables is known only from the module's inputs.
		setPending(claim, v1alpha1.ReasonWaitingForUpstream, fmt.Sprintf("class %s has not been checked yet: a claim that reads other claims is provisioned once its module's inputs are known", class.Name))
		return ctrl.Result{RequeueAfter: PendingResync}, nil
	}
	if class.Spec.Sharing != nil {
		// Claim Pending, its class shares resources: a place in one (shares.go).
		return r.provisionShare(ctx, claim, class, created)
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
			r.Recorder.Eventf(claim, res, corev1.EventTypeNormal, v1alpha1.ReasonProvisioning, "Provision",
				"provisioning resource %s from class %s (module %s@%s), bound to this claim", res.Name, class.Name, class.Spec.Module.Source, class.Spec.Module.Version)
			return r.bind(ctx, claim, res, created)
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
			return r.bind(ctx, claim, existing, created)
		}
	}
	setPending(claim, v1alpha1.ReasonProvisioningFailed, fmt.Sprintf("resources %s exist and are not pre-bound to this claim", strings.Join(names, ", ")))
	return ctrl.Result{RequeueAfter: PendingResync}, nil
}

// release tells that the claim's bound resource is released (an event; the resource controller
// finds the claim gone, marks the resource Released and reclaims it) and removes the claim's
// finalizer.
func (r *Reconciler) release(ctx context.Context, claim *v1alpha1.InfraClaim) error {
	if !controllerutil.ContainsFinalizer(claim, v1alpha1.FinalizerClaim) {
		return nil
	}
	secrets := []*v1alpha1.SecretReference{}
	if ref := claim.Spec.WriteConnectionSecretToRef; ref != nil {
		secrets = append(secrets, &v1alpha1.SecretReference{Namespace: claim.Namespace, Name: ref.Name})
	}
	if name := provision.BoundName(claim); name != "" {
		res := &v1alpha1.InfraResource{}
		err := r.Get(ctx, types.NamespacedName{Name: name}, res)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil && provision.IsBoundPair(res, claim) && res.Status.ConnectionSecret != nil {
			secrets = append(secrets, res.Status.ConnectionSecret)
		}
		if err == nil && provision.IsBoundPair(res, claim) && res.Status.Phase != v1alpha1.ResourceReleased {
			// Claim deleted, resource bound to it (UID match; a reservation without a UID is not a
			// bind, as in the PV controller): the resource controller, which alone writes the
			// resource's status, finds the claim gone (Released) and reclaims.
			r.Recorder.Eventf(res, claim, corev1.EventTypeNormal, v1alpha1.ReasonReleased, "Release",
				"claim %s/%s deleted; reclaim policy %s", claim.Namespace, claim.Name, res.Spec.ReclaimPolicy)
		}
	}
	for _, ref := range secrets {
		if err := r.releaseConnectionSecret(ctx, ref); err != nil {
			return err
		}
	}
	controllerutil.RemoveFinalizer(claim, v1alpha1.FinalizerClaim)
	return client.IgnoreNotFound(r.Update(ctx, claim))
}

// releaseConnectionSecret removes FinalizerReadByClaims from a connection Secret of the released
// claim (the one it names, and the one its resource last wrote): no claim reads it any more
// (holdForReaders let the release go on).
func (r *Reconciler) releaseConnectionSecret(ctx context.Context, ref *v1alpha1.SecretReference) error {
	secret := &corev1.Secret{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !controllerutil.ContainsFinalizer(secret, v1alpha1.FinalizerReadByClaims) {
		return nil
	}
	before := secret.DeepCopy()
	controllerutil.RemoveFinalizer(secret, v1alpha1.FinalizerReadByClaims)
	return client.IgnoreNotFound(r.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

// reasonOf returns the condition reason of a scheduler decision, or ProvisioningFailed.
func reasonOf(err error) string {
	var se *scheduler.Error
	if errors.As(err, &se) {
		return se.Reason
	}
	return v1alpha1.ReasonProvisioningFailed
}

// without is resources but the one named name.
func without(resources []v1alpha1.InfraResource, name string) []v1alpha1.InfraResource {
	out := make([]v1alpha1.InfraResource, 0, len(resources))
	for _, r := range resources {
		if r.Name != name {
			out = append(out, r)
		}
	}
	return out
}

// labelClaim labels res with its claim's namespace and name, as provisioning does: what the
// namespace's limits and budget count (heldBy).
func labelClaim(res *v1alpha1.InfraResource, claim *v1alpha1.InfraClaim) {
	if res.Labels == nil {
		res.Labels = map[string]string{}
	}
	res.Labels[v1alpha1.LabelClaimNamespace] = claim.Namespace
	res.Labels[v1alpha1.LabelClaimName] = v1alpha1.LabelValue(claim.Name)
}

func wasBound(claim *v1alpha1.InfraClaim) bool {
	return claim.Status.Phase == v1alpha1.ClaimBound || claim.Status.Phase == v1alpha1.ClaimLost
}

// bindingCandidates are the resources claim may bind to, from the cache's IndexResourceCandidates:
// those of its kind that name no claim, and those whose claimRef names it. Two lookups, whatever
// the number of resources bound to other claims.
func (r *Reconciler) bindingCandidates(ctx context.Context, claim *v1alpha1.InfraClaim) ([]v1alpha1.InfraResource, error) {
	var out []v1alpha1.InfraResource
	for _, key := range []string{shared.FreeKey(claim.Spec.ResourceKind), shared.ClaimKey(claim.Spec.ResourceKind, claim.Namespace, claim.Name)} {
		list := &v1alpha1.InfraResourceList{}
		if err := r.List(ctx, list, client.MatchingFields{shared.IndexResourceCandidates: key}); err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
	}
	return out, nil
}
