package claim

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// Shares: a claim of a sharing class (spec.sharing) gets a place in a shared resource of the class
// rather than a resource of its own (docs/sharing.md). The phases:
//  1. list the class's shared resources and their shares from the API server, under the class's
//     sharing lock (one claim of this manager decides at a time);
//  2. choose the fullest shared resource with a free place (scheduler.ChooseShared), or make a
//     new one and wait for it;
//  3. mark the join on the shared resource with the resourceVersion it was chosen by (a deletion
//     decided on an older version fails; a claim that waits marks it again every
//     joinRefresh, so a shared resource claims wait for is never idle);
//  4. wait until it is Available (its outputs are the share's inputs);
//  5. create the share, named after its place (a place taken meanwhile: AlreadyExists, retried),
//     pre-bound to the claim, and bind it as any provisioned resource.

// provisionShare takes a place for claim in a shared resource of class, as provision makes a
// resource of its own; created is bind's release (the namespace's lock).
func (r *Reconciler) provisionShare(ctx context.Context, claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, created func()) (ctrl.Result, error) {
	key := "shared/" + class.Name
	r.sharedLocks.LockKey(key)
	locked := true
	unlock := func() {
		if locked {
			locked = false
			_ = r.sharedLocks.UnlockKey(key)
		}
	}
	defer unlock()
	list := &v1alpha1.InfraResourceList{}
	if err := r.apiReader().List(ctx, list, client.MatchingLabels{v1alpha1.LabelClass: v1alpha1.LabelValue(class.Name)}); err != nil {
		return ctrl.Result{}, err
	}
	for i := range list.Items {
		if own := &list.Items[i]; own.Labels[v1alpha1.LabelShareOf] != "" && own.Spec.ClaimRef != nil && own.Spec.ClaimRef.UID == claim.UID {
			// Claim Pending, its share exists already (made by an earlier reconcile whose bind did
			// not finish, and not in the cache yet, or no longer fitting a changed request): bind
			// it, never a second one.
			unlock()
			return r.bind(ctx, claim, own, created)
		}
	}
	sharedRes, place := scheduler.ChooseShared(scheduler.GroupShares(list.Items), int(class.Spec.Sharing.MaxClaims))
	if sharedRes == nil {
		// Claim Pending, every shared resource of the class is full (or there is none): a new one.
		res, err := provision.SharedResourceFromClass(class, r.Namespace)
		if err != nil {
			setPending(claim, v1alpha1.ReasonProvisioningFailed, err.Error())
			return ctrl.Result{}, nil
		}
		if err := r.Create(ctx, res); err != nil {
			// A random name taken: the next reconcile draws another.
			return ctrl.Result{}, client.IgnoreAlreadyExists(err)
		}
		r.Recorder.Eventf(claim, res, corev1.EventTypeNormal, v1alpha1.ReasonProvisioning, "Provision",
			"provisioning shared resource %s from class %s (module %s@%s, %d claims each); this claim's share is made once it is Available",
			res.Name, class.Name, class.Spec.Module.Source, class.Spec.Module.Version, class.Spec.Sharing.MaxClaims)
		setPending(claim, v1alpha1.ReasonWaitingForShared, fmt.Sprintf("shared resource %s of class %s is being provisioned; the claim's share is made once it is Available", res.Name, class.Name))
		return ctrl.Result{RequeueAfter: r.joinRefresh()}, nil
	}
	// The join, marked whether the claim makes its share now or waits: while claims wait for a
	// shared resource (its first apply, a failed one, an approval) it is never idle, and never
	// deleted under them.
	if retry, err := r.markJoin(ctx, sharedRes); retry || err != nil {
		// Claim Pending, the shared resource changed since it was listed (another join, or its
		// deletion): choose again.
		setPending(claim, v1alpha1.ReasonWaitingForResource, fmt.Sprintf("shared resource %s changed while taking a place; retrying", sharedRes.Name))
		return ctrl.Result{RequeueAfter: shared.RetryDelay()}, err
	}
	if sharedRes.Status.Phase != v1alpha1.ResourceAvailable {
		// Claim Pending, the shared resource is not Available yet (or failed): its outputs are
		// the share's inputs. Its becoming Available wakes the claims of its kind; the join is
		// marked again at the latest after SharedJoinRefresh.
		setPending(claim, v1alpha1.ReasonWaitingForShared, fmt.Sprintf("shared resource %s is %s: the claim's share is made once it is Available%s",
			sharedRes.Name, phaseName(sharedRes), readyMessage(sharedRes)))
		return ctrl.Result{RequeueAfter: r.joinRefresh()}, nil
	}
	share, err := provision.ShareFromClass(claim, class, sharedRes, place)
	if err != nil {
		setPending(claim, v1alpha1.ReasonProvisioningFailed, err.Error())
		return ctrl.Result{}, nil
	}
	if err := r.Create(ctx, share); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Claim Pending, the place was taken by another claim meanwhile: choose again.
			setPending(claim, v1alpha1.ReasonWaitingForResource, fmt.Sprintf("place %d of shared resource %s was taken meanwhile; retrying", place, sharedRes.Name))
			return ctrl.Result{RequeueAfter: shared.RetryDelay()}, nil
		}
		setPending(claim, v1alpha1.ReasonProvisioningFailed, fmt.Sprintf("creating share %s: %v", share.Name, err))
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(claim, share, corev1.EventTypeNormal, v1alpha1.ReasonProvisioning, "Provision",
		"provisioning share %s (place %d of %d of shared resource %s) from class %s (module %s@%s), bound to this claim",
		share.Name, place, class.Spec.Sharing.MaxClaims, sharedRes.Name, class.Name, share.Spec.Module.Source, share.Spec.Module.Version)
	// The place is the share's now: the lock goes before bind, which may take the namespace's
	// lock again (rerender), so the two are never taken in the other order.
	unlock()
	return r.bind(ctx, claim, share, created)
}

// followShared brings a bound share's copies of its shared resource's non-sensitive outputs (the
// variables sharedOutputs names that the share holds as values) to the shared resource's current
// outputs: a changed endpoint is written into the share, whose next plan applies it through the
// approval rules (an event says so). Sensitive outputs need nothing: each run reads them from the
// shared resource's connection Secret. Nothing is written while the shared resource has no
// outputs (not applied yet, or gone) or when nothing changed.
func (r *Reconciler) followShared(ctx context.Context, claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) error {
	of := res.Labels[v1alpha1.LabelShareOf]
	if of == "" || res.Spec.ClassRef == nil || res.Spec.ClaimRef == nil || res.Spec.ClaimRef.UID != claim.UID {
		return nil
	}
	class := &v1alpha1.InfraClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: res.Spec.ClassRef.Name}, class); err != nil || class.Spec.Sharing == nil {
		return client.IgnoreNotFound(err)
	}
	sharedRes := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, types.NamespacedName{Name: of}, sharedRes); err != nil || len(sharedRes.Status.Outputs) == 0 {
		return client.IgnoreNotFound(err)
	}
	updated := res.DeepCopy()
	var changed []string
	for _, o := range class.Spec.Sharing.PerClaim.SharedOutputs {
		held, isValue := res.Spec.Variables[o.Variable]
		now, ok := sharedRes.Status.Outputs[o.Output]
		if !isValue || !ok || equality.Semantic.DeepEqual(held.Raw, now.Raw) {
			continue
		}
		updated.Spec.Variables[o.Variable] = *now.DeepCopy()
		changed = append(changed, o.Output)
	}
	if len(changed) == 0 {
		return nil
	}
	if err := r.Update(ctx, updated); err != nil {
		return err // a conflict is retried (RequeueOnConflict)
	}
	r.Recorder.Eventf(claim, res, corev1.EventTypeNormal, v1alpha1.ReasonSharedOutputsChanged, "Render",
		"shared resource %s's outputs %s changed: share %s is planned again with them", of, strings.Join(changed, ", "), res.Name)
	*res = *updated
	return nil
}

// joinRefresh is how often a claim that waits for a shared resource marks its join again
// (SharedJoinRefresh, provision.SharedJoinRefresh when zero).
func (r *Reconciler) joinRefresh() time.Duration {
	if r.SharedJoinRefresh > 0 {
		return r.SharedJoinRefresh
	}
	return provision.SharedJoinRefresh
}

// markJoin writes the join annotation (now) on sharedRes with the resourceVersion it was listed
// at: retry when that version is no longer the shared resource's (another join, its deletion).
func (r *Reconciler) markJoin(ctx context.Context, sharedRes *v1alpha1.InfraResource) (retry bool, err error) {
	joined := sharedRes.DeepCopy()
	if joined.Annotations == nil {
		joined.Annotations = map[string]string{}
	}
	joined.Annotations[v1alpha1.AnnotationSharedJoined] = time.Now().UTC().Format(time.RFC3339)
	err = r.Patch(ctx, joined, client.MergeFromWithOptions(sharedRes, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// apiReader reads from the API server when the manager gave one, else from the cache.
func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// phaseName is res's phase, or "not yet reconciled".
func phaseName(res *v1alpha1.InfraResource) string {
	if res.Status.Phase == "" {
		return "not yet reconciled"
	}
	return string(res.Status.Phase)
}

// readyMessage is ": " and res's Ready condition's message when it is False, else "".
func readyMessage(res *v1alpha1.InfraResource) string {
	for _, c := range res.Status.Conditions {
		if c.Type == v1alpha1.ConditionReady && c.Status == "False" && c.Message != "" {
			return ": " + c.Message
		}
	}
	return ""
}
