package claim

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

func TestSetChangePending(t *testing.T) {
	claim := func() *v1alpha1.InfraClaim {
		c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "db"}}
		c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionChangePending, Status: metav1.ConditionTrue, Reason: "Old"}}
		return c
	}
	plan := func(reason string) *v1alpha1.PendingPlan {
		return &v1alpha1.PendingPlan{ID: "0123456789ab", Reason: reason, Summary: v1alpha1.PlanSummary{Add: 1, Destroy: 1}}
	}
	cases := []struct {
		name      string
		res       v1alpha1.InfraResourceStatus
		reason    string // "" when the condition must be absent
		mentioned []string
	}{
		{"nothing waits", v1alpha1.InfraResourceStatus{}, "", nil},
		{"Manual approval", v1alpha1.InfraResourceStatus{PendingPlan: plan(v1alpha1.HoldManual)}, v1alpha1.ReasonWaitingForApproval,
			[]string{"plan 0123456789ab", "approval is Manual", "kubectl conductor approve claim/db -n team-a", "kubectl conductor plan claim/db -n team-a"}},
		{"destructive change", v1alpha1.InfraResourceStatus{PendingPlan: plan(v1alpha1.HoldDestructive)}, v1alpha1.ReasonDestructiveChange,
			[]string{"1 to add, 0 to change, 1 to destroy", "deletes or replaces", "kubectl conductor approve claim/db -n team-a"}},
		{"imported object replaced", v1alpha1.InfraResourceStatus{PendingPlan: plan(v1alpha1.HoldImportedReplaced)}, v1alpha1.ReasonReplaceNeedsApproval,
			[]string{"imported objects"}},
		{"creates in doubt", v1alpha1.InfraResourceStatus{PendingPlan: plan(v1alpha1.HoldInterruptedCreate)}, v1alpha1.ReasonInterruptedCreate,
			[]string{"kubectl conductor creates claim/db -n team-a", "--import ADDRESS=ID"}},
		{"creates in doubt, no plan (Synced says so)", v1alpha1.InfraResourceStatus{Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInterruptedCreate}}}, v1alpha1.ReasonInterruptedCreate, nil},
		{"a newer module version", v1alpha1.InfraResourceStatus{Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionUpgradeAvailable, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonNewerVersion, Message: "class db offers 1.2.0"}}},
			v1alpha1.ReasonNewerVersion, []string{"class db offers 1.2.0", "kubectl conductor upgrade claim/db -n team-a"}},
		{"resource paused", v1alpha1.InfraResourceStatus{PendingPlan: plan(v1alpha1.HoldManual), Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionSynced, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReconcilePaused}}}, v1alpha1.ReasonReconcilePaused,
			[]string{"resource db-1a2b3 is paused", "kubectl conductor resume claim/db -n team-a"}},
		{"up to date", v1alpha1.InfraResourceStatus{Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionUpgradeAvailable, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonUpToDate}}}, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := claim()
			setChangePending(cl, &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "db-1a2b3"}, Status: c.res})
			got := meta.FindStatusCondition(cl.Status.Conditions, v1alpha1.ConditionChangePending)
			if c.reason == "" {
				if got != nil {
					t.Fatalf("ChangePending = %+v; want none", got)
				}
				return
			}
			if got == nil || got.Status != metav1.ConditionTrue || got.Reason != c.reason {
				t.Fatalf("ChangePending = %+v; want True, %s", got, c.reason)
			}
			for _, m := range c.mentioned {
				if !strings.Contains(got.Message, m) {
					t.Errorf("message %q does not say %q", got.Message, m)
				}
			}
		})
	}
}

func TestKeepTransitionTime(t *testing.T) {
	then := metav1.NewTime(metav1.Now().Add(-time.Hour))
	prev := &metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonConnectionSecretMissing, LastTransitionTime: then}
	claim := &v1alpha1.InfraClaim{}
	claim.Status.Conditions = []metav1.Condition{*prev}
	// In memory: mirrored True from the resource, then False again (the Secret still missing).
	shared.SetCondition(&claim.Status.Conditions, 1, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonApplied, "")
	shared.SetCondition(&claim.Status.Conditions, 1, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonConnectionSecretMissing, "")
	keepTransitionTime(claim.Status.Conditions, prev)
	if got := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime; !got.Equal(&then) {
		t.Errorf("lastTransitionTime %v; want the earlier %v", got, then)
	}
	// A real transition keeps its new time.
	shared.SetCondition(&claim.Status.Conditions, 1, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonApplied, "")
	keepTransitionTime(claim.Status.Conditions, prev)
	if got := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime; got.Equal(&then) {
		t.Errorf("a transition to True kept the old time")
	}
}
