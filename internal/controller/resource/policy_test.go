package resource

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/policy"
)

// TestPlanPolicyReplans: a plan held under the class's rules is planned again when the rules or
// what they see (a claim's label) change, on a sync request only when it was refused (a plan
// waiting for a person is not discarded), and never without the rules of a class that is gone;
// an approval of a refused plan is no approval.
func TestPlanPolicyReplans(t *testing.T) {
	rules := []policy.Rule{{Name: "env", Expression: "claim.labels.env == 'dev'", Action: policy.ActionDeny}}
	facts := policy.Facts{Claim: policy.Object{Namespace: "a", Name: "c", Labels: map[string]string{"env": "prod"}}}
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "k"},
		Spec: v1alpha1.InfraClassSpec{Policy: &v1alpha1.PlanPolicy{Rules: []v1alpha1.PolicyRule{
			{Name: "env", Expression: "claim.labels.env == 'dev'", Action: v1alpha1.PolicyDeny}}}}}
	scope := func(reason string, annotations map[string]string) *resourceScope {
		res := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: annotations},
			Spec: v1alpha1.InfraResourceSpec{ClassRef: &v1alpha1.ClassReference{Name: "k"}},
			Status: v1alpha1.InfraResourceStatus{LastRun: &v1alpha1.RunStatus{Result: RunWaitingForApproval},
				PendingPlan: &v1alpha1.PendingPlan{ID: "p1", Reason: reason, PolicyDigest: policyDigest(rules, facts)}}}
		return &resourceScope{res: res, class: class, policy: rules, facts: facts}
	}
	if s := scope(WaitPolicyDenied, nil); policyMoved(s) || runAsked(s) {
		t.Fatal("nothing changed, yet a new plan is due")
	}
	relabelled := scope(WaitPolicyDenied, nil)
	relabelled.facts = policy.Facts{Claim: policy.Object{Namespace: "a", Name: "c", Labels: map[string]string{"env": "dev"}}}
	if !policyMoved(relabelled) {
		t.Error("a claim's label a rule reads changed, and no new plan is due")
	}
	reruled := scope(WaitPolicyDenied, nil)
	reruled.policy = nil
	if !policyMoved(reruled) {
		t.Error("the class's rules changed, and no new plan is due")
	}
	gone := scope(WaitPolicyDenied, nil)
	gone.class, gone.policy, gone.facts = nil, nil, policy.Facts{}
	if policyMoved(gone) {
		t.Error("a gone class's rules counted as removed: the refused plan would be planned without them")
	}
	sync := map[string]string{v1alpha1.AnnotationReconcileRequestedAt: "now"}
	if !runAsked(scope(WaitPolicyDenied, sync)) {
		t.Error("a sync request does not plan a refused plan again")
	}
	if runAsked(scope(WaitPolicyApproval, sync)) {
		t.Error("a sync request discards a plan that waits for a person")
	}
	approvedRefusal := scope(WaitPolicyDenied, map[string]string{v1alpha1.AnnotationApprovePlan: "p1"})
	if approved(approvedRefusal.res) {
		t.Error("an approval of a refused plan counts")
	}
}
