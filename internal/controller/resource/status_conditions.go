package resource

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// The conditions besides Synced and Ready (recordOutcome), each set by one function here: the
// only places, with recordOutcome and phaseOf, that write conditions or the phase.

// staleApproval says so when the approval annotation names another plan than the one that waits
// (it was approved after a newer plan replaced it): nothing is applied.
func staleApproval(res *v1alpha1.InfraResource) {
	id, pp := approvedID(res), res.Status.PendingPlan
	if id == "" || pp == nil || id == pp.ID {
		return
	}
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonPlanDiscarded,
		fmt.Sprintf("the approved plan %s is not the plan that waits: plan %s replaced it (a newer generation, or the infrastructure changed); "+
			"nothing is applied until %s=%s", id, pp.ID, v1alpha1.AnnotationApprovePlan, pp.ID))
}

// markQueued says the run waits for a runner (Synced Unknown, WaitingForRunner): its place in line
// and how many wait.
func markQueued(res *v1alpha1.InfraResource, position, waiting int) {
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionSynced, metav1.ConditionUnknown, v1alpha1.ReasonWaitingForRunner,
		fmt.Sprintf("waiting for a runner: %d in line of %d waiting (runs are served across namespaces in turn)", position, waiting))
}

// markDrift sets Drifted: True (DriftDetected) or False (NoDrift) with message; False also clears
// status.drift.drifted.
func markDrift(res *v1alpha1.InfraResource, drifted bool, message string) {
	if !drifted {
		if res.Status.Drift != nil {
			res.Status.Drift.Drifted = false
		}
		shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionDrifted, metav1.ConditionFalse, v1alpha1.ReasonNoDrift, message)
		return
	}
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionDrifted, metav1.ConditionTrue, v1alpha1.ReasonDriftDetected, message)
}

// markPaused says the resource is paused (Synced False, ReconcilePaused): nothing runs until the
// annotation goes.
func markPaused(res *v1alpha1.InfraResource) {
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonReconcilePaused,
		fmt.Sprintf("paused by %s=true: no plan, apply or drift check runs until it is removed; deleting the resource still reclaims it",
			v1alpha1.AnnotationPaused))
}

// markResumed ends a pause that Synced still shows and reports whether there was one. A resource
// whose last run applied its spec is Synced again (the drift check that follows says whether the
// infrastructure still matches); any other keeps ReconcilePaused until the run that follows at once
// records its outcome.
func markResumed(res *v1alpha1.InfraResource) bool {
	c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionSynced)
	if c == nil || c.Reason != v1alpha1.ReasonReconcilePaused {
		return false
	}
	if isDriftCheck(res) {
		shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied,
			"resumed: the last run applied this generation")
	}
	return true
}

// markInUse says a deleted resource waits for its claim (Ready False, ResourceInUse).
func markInUse(res *v1alpha1.InfraResource, message string) {
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonResourceInUse, message)
}

// markUpgrade records the module version class offers beyond the resource's (offered, "" when
// none): status.availableModuleVersion and UpgradeAvailable (NewerVersion or UpToDate).
func markUpgrade(res *v1alpha1.InfraResource, class *v1alpha1.InfraClass, offered string) {
	res.Status.AvailableModuleVersion = offered
	if offered == "" {
		shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionUpgradeAvailable, metav1.ConditionFalse,
			v1alpha1.ReasonUpToDate, fmt.Sprintf("module %s@%s is the newest version its class offers", res.Spec.Module.Source, res.Spec.Module.Version))
		return
	}
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionUpgradeAvailable, metav1.ConditionTrue, v1alpha1.ReasonNewerVersion,
		fmt.Sprintf("class %s offers %s of module %s; this resource is on %s: set spec.module.version to upgrade (the plan goes through the approval gate and the destructive-change guard)",
			class.Name, offered, res.Spec.Module.Source, res.Spec.Module.Version))
}
