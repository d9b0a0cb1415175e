package claim

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
)

// takeFromPool binds a ready resource of the class's ready pool to the claim, when the class
// keeps one and the claim asks exactly the pool's requests; nil when no member is ready (the
// claim is then provisioned as without a pool). The resource's one Update, carrying the
// resourceVersion it was read at (two claims cannot take one member), writes the claimRef with
// the claim's UID, the class's reclaim policy, the claim's labels, and removes
// conductor.io/ready-pool (the pool reconciler then provisions the next), and marks it
// conductor.io/taken-from-pool. Its variables were rendered for the pool: bind's rerender renders
// them for the claim, the resource applies the difference as an update, and the claim is Ready
// only once that is applied (setBound, poolTakeApplied). Errors: the List's and the Update's other than a conflict or a member
// gone (the next member is tried).
func (r *Reconciler) takeFromPool(ctx context.Context, claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass) (*v1alpha1.InfraResource, error) {
	p := class.Spec.ReadyPool
	if p == nil || p.Size == 0 || !sameRequests(claim.Spec.Resources.Requests, p.Resources.Requests) {
		return nil, nil
	}
	list := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, list, client.MatchingLabels{v1alpha1.LabelReadyPool: v1alpha1.LabelValue(class.Name)}); err != nil {
		return nil, err
	}
	// The oldest ready member first: the one longest applied.
	slices.SortFunc(list.Items, func(a, b v1alpha1.InfraResource) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	for i := range list.Items {
		res := &list.Items[i]
		if !takeable(res, class) {
			continue
		}
		taken := res.DeepCopy()
		taken.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
		taken.Spec.ReclaimPolicy = class.Spec.ReclaimPolicy
		if taken.Spec.ReclaimPolicy == "" {
			taken.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
		}
		delete(taken.Labels, v1alpha1.LabelReadyPool)
		if taken.Annotations == nil {
			taken.Annotations = map[string]string{}
		}
		taken.Annotations[v1alpha1.AnnotationTakenFromPool] = string(claim.UID)
		taken.Labels[v1alpha1.LabelClaimNamespace] = claim.Namespace
		taken.Labels[v1alpha1.LabelClaimName] = v1alpha1.LabelValue(claim.Name)
		switch err := r.Update(ctx, taken); {
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			continue // another claim took it, or the pool shrank
		case err != nil:
			return nil, fmt.Errorf("taking resource %s from class %s's ready pool: %w", res.Name, class.Name, err)
		}
		metrics.ReadyPoolBind(class.Name)
		r.Recorder.Eventf(claim, taken, corev1.EventTypeNormal, v1alpha1.ReasonBoundFromPool, "Bind",
			"took resource %s, ready in class %s's pool; the claim's parameters are applied to it next", taken.Name, class.Name)
		return taken, nil
	}
	return nil, nil
}

// takeable reports whether a pool member may go to a claim now: Available, free, not being
// deleted, of the class and on its current module (a member of an older version is replaced by
// the pool reconciler, never handed out).
func takeable(res *v1alpha1.InfraResource, class *v1alpha1.InfraClass) bool {
	return res.Status.Phase == v1alpha1.ResourceAvailable && res.Spec.ClaimRef == nil && res.DeletionTimestamp.IsZero() &&
		res.Spec.ClassRef != nil && res.Spec.ClassRef.Name == class.Name && res.Spec.Module == class.Spec.Module
}

// sameRequests reports whether a and b ask the same quantities of the same resource names.
func sameRequests(a, b v1alpha1.Quantities) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// poolTakeApplied ends a take from the pool once the claim's own parameters are applied to the
// resource (setBound then mirrors its Ready as for any claim): it removes
// conductor.io/taken-from-pool with a merge patch at the resourceVersion read, so that a stale
// copy, read before the claim's rendering reached the resource, never removes it (a conflict is
// retried by the work queue). Nothing is written for a resource that is not marked for this claim
// or not applied yet.
func (r *Reconciler) poolTakeApplied(ctx context.Context, claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) error {
	if res.Annotations[v1alpha1.AnnotationTakenFromPool] == "" || !ownParametersApplied(res) {
		return nil
	}
	patched := res.DeepCopy()
	delete(patched.Annotations, v1alpha1.AnnotationTakenFromPool)
	if err := r.Patch(ctx, patched, client.MergeFromWithOptions(res, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("resource %s, taken from the ready pool by claim %s/%s: %w", res.Name, claim.Namespace, claim.Name, err)
	}
	*res = *patched
	return nil
}

// ownParametersApplied reports whether a resource's current spec (its claim's rendering, for a
// member taken from a pool) has been applied: status.observedGeneration is its generation.
func ownParametersApplied(res *v1alpha1.InfraResource) bool {
	return res.Status.ObservedGeneration == res.Generation
}
