package claim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// DefaultConnectionSecretCheck is how often a bound claim whose resource writes a connection
// Secret reads it (one GET; Secrets are not cached), so that one deleted by hand is noticed within
// that time: the claim is not Ready while it is missing, and the resource writes it again at its
// own check (SecretCheckInterval).
const DefaultConnectionSecretCheck = time.Minute

// connectionSecretRetry is how soon a claim whose connection Secret is missing looks again.
const connectionSecretRetry = 5 * time.Second

// checkConnectionSecret reads the connection Secret of a bound claim whose Ready condition is
// True and whose resource records one: missing, or not the resource's (another object took the
// name), the claim's Ready turns False with reason ConnectionSecretMissing. It returns when to look
// again: connectionSecretRetry while it is missing, the check interval while it is there, zero
// when the resource writes none; an error of the API server other than NotFound as it is.
func (r *Reconciler) checkConnectionSecret(ctx context.Context, claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) (time.Duration, error) {
	ref := res.Status.ConnectionSecret
	if ref == nil || !meta.IsStatusConditionTrue(claim.Status.Conditions, v1alpha1.ConditionReady) {
		return 0, nil
	}
	secret := &corev1.Secret{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonConnectionSecretMissing,
			fmt.Sprintf("connection Secret %s/%s is missing; resource %s writes it again from its state within %s", ref.Namespace, ref.Name, res.Name, r.secretCheck()))
		return connectionSecretRetry, nil
	case err != nil:
		return 0, err
	case !provision.IsConnectionSecretOf(secret, res):
		shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonConnectionSecretMissing,
			fmt.Sprintf("Secret %s/%s is not the connection Secret of resource %s (another object of that name); delete it, or name another in spec.writeConnectionSecretToRef", ref.Namespace, ref.Name, res.Name))
		return connectionSecretRetry, nil
	}
	return r.secretCheck(), nil
}

func (r *Reconciler) secretCheck() time.Duration {
	if r.ConnectionSecretCheck > 0 {
		return r.ConnectionSecretCheck
	}
	return DefaultConnectionSecretCheck
}

// setChangePending says on a bound claim what change its resource holds for a person, and how to
// move it on (kubectl conductor …), in the ChangePending condition; it removes the condition when
// nothing waits. In order: the resource paused (conductor.io/paused=true: nothing runs, whatever
// else waits, ReconcilePaused), a plan waiting for approval or creates in doubt (status.pendingPlan, or
// Synced's reason InterruptedCreate) or refused by a Deny rule of the class's policy
// (PolicyDenied), then a newer module version the class offers (UpgradeAvailable=True).
func setChangePending(claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) {
	target := fmt.Sprintf("claim/%s -n %s", claim.Name, claim.Namespace)
	set := func(reason, message string) {
		shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionChangePending, metav1.ConditionTrue, reason, message)
	}
	synced := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionSynced)
	pp := res.Status.PendingPlan
	switch {
	case res.Annotations[v1alpha1.AnnotationPaused] == "true" || (synced != nil && synced.Reason == v1alpha1.ReasonReconcilePaused):
		set(v1alpha1.ReasonReconcilePaused, fmt.Sprintf("resource %s is paused (annotation %s=true): no plan, apply or drift check runs, so a change of this claim waits until it is resumed "+
			"(kubectl conductor resume %s)", res.Name, v1alpha1.AnnotationPaused, target))
	case (pp != nil && pp.Reason == v1alpha1.HoldInterruptedCreate) || (synced != nil && synced.Reason == v1alpha1.ReasonInterruptedCreate):
		set(v1alpha1.ReasonInterruptedCreate, fmt.Sprintf("resource %s holds its next apply: a run that died had started creates that may exist (status.createsPending). "+
			"See them with kubectl conductor creates %s, then --import ADDRESS=ID, --approve (create again) or --abandon", res.Name, target))
	case pp != nil && pp.Reason == v1alpha1.HoldPolicyDenied:
		// No approval moves it on: the claim (its parameters or labels) or the class's policy must change.
		set(v1alpha1.ReasonPolicyDenied, fmt.Sprintf("resource %s's plan %s (%d to add, %d to change, %d to destroy) was refused by the class's policy, %s. "+
			"Change the claim so that its plan passes (or ask the platform team); read the plan with kubectl conductor plan %s",
			res.Name, pp.ID, pp.Summary.Add, pp.Summary.Change, pp.Summary.Destroy, pp.Message, target))
	case pp != nil:
		reason, why := v1alpha1.ReasonWaitingForApproval, "approval is Manual"
		switch pp.Reason {
		case v1alpha1.HoldDestructive:
			reason, why = v1alpha1.ReasonDestructiveChange, "it deletes or replaces existing objects"
		case v1alpha1.HoldImportedReplaced:
			reason, why = v1alpha1.ReasonReplaceNeedsApproval, "it destroys or replaces imported objects"
		case v1alpha1.HoldPolicyApproval:
			why = "the class's policy, " + pp.Message
		}
		set(reason, fmt.Sprintf("resource %s holds plan %s (%d to add, %d to change, %d to destroy) for approval: %s. "+
			"Read it with kubectl conductor plan %s; apply it with kubectl conductor approve %s",
			res.Name, pp.ID, pp.Summary.Add, pp.Summary.Change, pp.Summary.Destroy, why, target, target))
	case meta.IsStatusConditionTrue(res.Status.Conditions, v1alpha1.ConditionUpgradeAvailable):
		up := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionUpgradeAvailable)
		set(v1alpha1.ReasonNewerVersion, fmt.Sprintf("%s; upgrade with kubectl conductor upgrade %s", up.Message, target))
	default:
		meta.RemoveStatusCondition(&claim.Status.Conditions, v1alpha1.ConditionChangePending)
	}
}

// keepTransitionTime gives the condition of prev's type in conds prev's lastTransitionTime when
// its status is prev's: a reconcile that set it to another status and back in memory (setBound
// mirrors the resource's Ready, then checkConnectionSecret finds the Secret missing again) did not
// change it.
func keepTransitionTime(conds []metav1.Condition, prev *metav1.Condition) {
	if prev == nil {
		return
	}
	if c := meta.FindStatusCondition(conds, prev.Type); c != nil && c.Status == prev.Status {
		c.LastTransitionTime = prev.LastTransitionTime
	}
}
