package shared

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func TestSetHealthConditions(t *testing.T) {
	cases := []struct {
		name                 string
		ready                *metav1.Condition
		reconciling, stalled bool
	}{
		{"no Ready yet: nothing said", nil, false, false},
		{"Ready", &metav1.Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied}, false, false},
		{"provisioning", &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonProvisioning}, true, false},
		{"not ready yet", &metav1.Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonResourceNotReady}, true, false},
		{"an apply that failed is retried", &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonApplyFailed}, true, false},
		{"lost: a person must act", &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonResourceLost}, false, true},
		{"invalid variables: a person must act", &metav1.Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInvalidVariables}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			claim := &v1alpha1.InfraClaim{}
			// Left from an earlier state: both go when they no longer hold.
			claim.Status.Conditions = []metav1.Condition{
				{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: "Old"},
				{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: "Old"},
			}
			if c.ready == nil {
				claim.Status.Conditions = nil
			} else {
				c.ready.Type, c.ready.Message = v1alpha1.ConditionReady, "why"
				meta.SetStatusCondition(&claim.Status.Conditions, *c.ready)
			}
			SetHealthConditions(claim)
			rec := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionReconciling)
			st := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionStalled)
			if (rec != nil) != c.reconciling || (st != nil) != c.stalled {
				t.Fatalf("Reconciling %v, Stalled %v; want %v, %v", rec, st, c.reconciling, c.stalled)
			}
			for _, cond := range []*metav1.Condition{rec, st} {
				if cond != nil && (cond.Status != metav1.ConditionTrue || cond.Reason != c.ready.Reason || cond.Message != "why") {
					t.Errorf("%s = %+v; want True with Ready's reason and message", cond.Type, cond)
				}
			}
		})
	}
}
