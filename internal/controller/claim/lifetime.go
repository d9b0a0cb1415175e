package claim

// Lifetimes: a claim may say how long it lives (spec.lifetime), bounded by its class's maxLifetime;
// the class's lifetimeNotice before the end it says so (LifetimeEnding, a Warning event), and at
// the end the claim is deleted, so its resource is reclaimed by its reclaim policy as for any
// deleted claim. What HCP Terraform calls ephemeral workspaces' auto-destroy, for claims.

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// expire applies the claim's lifetime at now: status.expiresAt, LifetimeEnding within the notice
// (a Warning event when it turns True), and at the end a Warning event and the claim's deletion
// (UID precondition: never another claim of the name). It returns gone when the claim was deleted,
// and when to look again (0: no lifetime). Errors: reading the class, or the deletion's.
//
// The end is provision.EndOf's: never earlier than a whole notice after the claim was told of it, so a
// class's new or shorter maxLifetime deletes no claim at once (a changed setting never destroys
// without notice).
func (r *Reconciler) expire(ctx context.Context, claim *v1alpha1.InfraClaim, now time.Time) (gone bool, wait time.Duration, err error) {
	class, err := r.classOf(ctx, claim)
	if err != nil {
		return false, 0, err
	}
	if problem := lifetimeProblem(claim, class); problem != "" {
		if cond := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionLifetimeEnding); cond == nil || cond.Reason != v1alpha1.ReasonInvalidDuration {
			r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidDuration, "Expire", "%s", problem)
		}
		shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionLifetimeEnding, metav1.ConditionUnknown,
			v1alpha1.ReasonInvalidDuration, problem)
		return false, 0, nil
	}
	lifetime, bounded := provision.LifetimeOf(claim, class)
	if lifetime == 0 {
		claim.Status.ExpiresAt = nil
		meta.RemoveStatusCondition(&claim.Status.Conditions, v1alpha1.ConditionLifetimeEnding)
		return false, 0, nil
	}
	notice := provision.NoticeOf(class)
	end, held := provision.EndOf(claim, lifetime, notice, now)
	claim.Status.ExpiresAt = &metav1.Time{Time: end}
	if !now.Before(end) {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, v1alpha1.ReasonExpired, "Expire",
			"the claim's lifetime (%s) ended at %s: deleting it; its resource is reclaimed by its reclaim policy", lifetime, end.UTC().Format(time.RFC3339))
		err := r.Delete(ctx, claim, client.Preconditions{UID: &claim.UID})
		return true, 0, client.IgnoreNotFound(err)
	}
	if left := end.Sub(now); left > notice {
		meta.RemoveStatusCondition(&claim.Status.Conditions, v1alpha1.ConditionLifetimeEnding)
		return false, left - notice, nil
	}
	msg := fmt.Sprintf("the claim's lifetime (%s) ends at %s: it is then deleted and its resource reclaimed by its reclaim policy; "+
		"raise spec.lifetime to extend it", lifetime, end.UTC().Format(time.RFC3339))
	if bounded || lifetime != provision.ClaimLifetime(claim) {
		msg += fmt.Sprintf(" (up to class %s's maxLifetime %s)", class.Name, class.Spec.MaxLifetime.Duration)
	}
	if held {
		msg += fmt.Sprintf("; its end moved earlier after the claim was told of it, so it is held a whole notice (%s) after that", notice)
	}
	if !meta.IsStatusConditionTrue(claim.Status.Conditions, v1alpha1.ConditionLifetimeEnding) {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, v1alpha1.ReasonLifetimeEnding, "Expire", "%s", msg)
	}
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionLifetimeEnding, metav1.ConditionTrue,
		v1alpha1.ReasonLifetimeEnding, msg)
	return false, end.Sub(now), nil
}

// lifetimeProblem describes the claim's spec.lifetime, or its class's maxLifetime, when the
// controller cannot read it (v1alpha1.Duration's Unparsed: stored before the CRD refused it), with
// what follows: the claim is not ended by a lifetime until it is mended, so a value nobody can read
// never deletes a claim. "" when both read (or are unset).
func lifetimeProblem(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass) string {
	problem := claim.Spec.Lifetime.Problem("spec.lifetime")
	if class != nil && problem == "" {
		problem = class.Spec.MaxLifetime.Problem("class " + class.Name + "'s spec.maxLifetime")
	}
	if problem == "" {
		return ""
	}
	return problem + "; no lifetime ends this claim meanwhile"
}

// classOf is the class whose maxLifetime and notice apply to the claim: spec.className, else the
// bound resource's class; nil when there is none (a static resource, a class gone).
func (r *Reconciler) classOf(ctx context.Context, claim *v1alpha1.InfraClaim) (*v1alpha1.InfraClass, error) {
	name := claim.Spec.ClassName
	if name == "" && claim.Spec.ResourceName != "" {
		res := &v1alpha1.InfraResource{}
		if err := r.Get(ctx, types.NamespacedName{Name: claim.Spec.ResourceName}, res); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		if res.Spec.ClassRef != nil {
			name = res.Spec.ClassRef.Name
		}
	}
	if name == "" {
		return nil, nil
	}
	class := &v1alpha1.InfraClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return class, nil
}

// sooner is result with its requeue brought forward to wait, when wait is sooner (0: none).
func sooner(after, wait time.Duration) time.Duration {
	if wait > 0 && (after == 0 || wait < after) {
		return wait
	}
	return after
}
