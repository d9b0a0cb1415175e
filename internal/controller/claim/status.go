package claim

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// The claim's status, as pure functions of what was observed; status_test.go covers them.

// setPending records that the claim is not bound, and why.
func setPending(claim *v1alpha1.InfraClaim, reason, message string) {
	claim.Status.Phase = v1alpha1.ClaimPending
	claim.Status.ResourceName = ""
	claim.Status.Capacity = nil
	claim.Status.MonthlyCost = ""
	meta.RemoveStatusCondition(&claim.Status.Conditions, v1alpha1.ConditionChangePending)
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionBound, metav1.ConditionFalse, reason, message)
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
}

// setBound records the bind and mirrors the resource's Ready condition; a resource taken from a
// ready pool (conductor.io/taken-from-pool) whose spec, the claim's rendering, is not applied yet
// makes Ready False (ApplyingClaimParameters), whatever the pool's apply left.
func setBound(claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) {
	claim.Status.Phase = v1alpha1.ClaimBound
	claim.Status.ResourceName = res.Name
	claim.Status.Capacity = res.Spec.Capacity.DeepCopy()
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionBound, metav1.ConditionTrue,
		v1alpha1.ReasonBound, "bound to resource "+res.Name)
	ready := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionReady)
	switch {
	case res.Annotations[v1alpha1.AnnotationTakenFromPool] != "" && !ownParametersApplied(res):
		shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse,
			v1alpha1.ReasonApplyingClaimParameters, fmt.Sprintf("resource %s was taken from the class's ready pool, applied with the pool's parameters: "+
				"it is Ready once the claim's are applied (its generation %d, applied %d)", res.Name, res.Generation, res.Status.ObservedGeneration))
	case ready == nil:
		shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionReady, metav1.ConditionUnknown,
			v1alpha1.ReasonResourceNotReady, "resource "+res.Name+" has not reported readiness yet")
	default:
		shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionReady, ready.Status, ready.Reason, ready.Message)
	}
}

// setLost records that the bound resource is gone or bound elsewhere.
func setLost(claim *v1alpha1.InfraClaim, message string) {
	claim.Status.Phase = v1alpha1.ClaimLost
	meta.RemoveStatusCondition(&claim.Status.Conditions, v1alpha1.ConditionChangePending)
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionBound, metav1.ConditionFalse, v1alpha1.ReasonResourceLost, message)
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonResourceLost, message)
}
