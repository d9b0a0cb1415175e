package shared

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// WithConditions is an object of this API: its status.conditions.
type WithConditions interface {
	StatusConditions() *[]metav1.Condition
	GetGeneration() int64
}

// SetHealthConditions derives kstatus' Reconciling and Stalled conditions from the Ready
// condition, as GitOps tools read them (sigs.k8s.io/cli-utils/pkg/kstatus, Flux's health checks):
// Ready=True: neither; Ready not True with a reason of v1alpha1.TerminalReasons: Stalled=True
// (kstatus Failed); otherwise Reconciling=True (InProgress). Both carry Ready's reason and
// message. An object with no Ready condition yet is left alone. PatchStatus calls it, so every
// status write of every kind keeps them.
func SetHealthConditions(obj WithConditions) {
	conds := obj.StatusConditions()
	ready := meta.FindStatusCondition(*conds, v1alpha1.ConditionReady)
	if ready == nil {
		return
	}
	set := func(typ string, on bool) {
		if !on {
			meta.RemoveStatusCondition(conds, typ)
			return
		}
		SetCondition(conds, obj.GetGeneration(), typ, metav1.ConditionTrue, ready.Reason, ready.Message)
	}
	terminal := ready.Status != metav1.ConditionTrue && v1alpha1.TerminalReasons[ready.Reason]
	set(v1alpha1.ConditionStalled, terminal)
	set(v1alpha1.ConditionReconciling, ready.Status != metav1.ConditionTrue && !terminal)
}
