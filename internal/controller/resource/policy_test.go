package resource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
			Status: v1alpha1.InfraResourceStatus{LastRun: &v1alpha1.RunStatus{Result: v1alpha1.RunWaitingForApproval},
				PendingPlan: &v1alpha1.PendingPlan{ID: "p1", Reason: reason, PolicyDigest: policyDigest(rules, facts)}}}
		return &resourceScope{res: res, class: class, policy: rules, facts: facts}
	}
	if s := scope(v1alpha1.HoldPolicyDenied, nil); policyMoved(s) || runAsked(s) {
		t.Fatal("nothing changed, yet a new plan is due")
	}
	relabelled := scope(v1alpha1.HoldPolicyDenied, nil)
	relabelled.facts = policy.Facts{Claim: policy.Object{Namespace: "a", Name: "c", Labels: map[string]string{"env": "dev"}}}
	if !policyMoved(relabelled) {
		t.Error("a claim's label a rule reads changed, and no new plan is due")
	}
	reruled := scope(v1alpha1.HoldPolicyDenied, nil)
	reruled.policy = nil
	if !policyMoved(reruled) {
		t.Error("the class's rules changed, and no new plan is due")
	}
	gone := scope(v1alpha1.HoldPolicyDenied, nil)
	gone.class, gone.policy, gone.facts = nil, nil, policy.Facts{}
	if policyMoved(gone) {
		t.Error("a gone class's rules counted as removed: the refused plan would be planned without them")
	}
	sync := map[string]string{v1alpha1.AnnotationReconcileRequestedAt: "now"}
	if !runAsked(scope(v1alpha1.HoldPolicyDenied, sync)) {
		t.Error("a sync request does not plan a refused plan again")
	}
	if runAsked(scope(v1alpha1.HoldPolicyApproval, sync)) {
		t.Error("a sync request discards a plan that waits for a person")
	}
	approvedRefusal := scope(v1alpha1.HoldPolicyDenied, map[string]string{v1alpha1.AnnotationApprovePlan: "p1"})
	if approved(approvedRefusal.res) {
		t.Error("an approval of a refused plan counts")
	}
}

// Issue 65 item 8: rules may read the claim's namespace labels (what the cluster's administrators
// set, where the claim's own labels are its tenant's). The namespace is read only for a class
// whose rules name it, and facts without it digest as they did before the field existed, so an
// upgrade plans no held plan again.
func TestPolicyFactsCarryNamespaceLabelsOnlyWhenARuleReadsThem(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"env": "prod"}}}
	claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{"env": "dev"}}}
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(ns, claim).Build()
	r := &syncer{api: api}
	classWith := func(expr string) *v1alpha1.InfraClass {
		return &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "k"},
			Spec: v1alpha1.InfraClassSpec{Policy: &v1alpha1.PlanPolicy{Rules: []v1alpha1.PolicyRule{
				{Name: "env", Expression: expr, Action: v1alpha1.PolicyDeny}}}}}
	}
	res := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec: v1alpha1.InfraResourceSpec{ClassRef: &v1alpha1.ClassReference{Name: "k"},
			ClaimRef: &v1alpha1.ClaimReference{Namespace: "shop", Name: "web"}}}

	reads := &resourceScope{res: res, class: classWith("namespaceObject.labels['env'] == 'prod'")}
	if err := r.preparePolicy(context.Background(), reads); err != nil {
		t.Fatal(err)
	}
	if got := reads.facts.Namespace; got.Name != "shop" || got.Labels["env"] != "prod" {
		t.Fatalf("a rule reads namespaceObject.labels: the facts' namespace is %+v, want shop with env=prod", got)
	}
	set, err := policy.Compile(reads.policy)
	if err != nil {
		t.Fatal(err)
	}
	change := policy.Plan{Changes: []policy.Change{{Address: "x.y", Actions: []string{"create"}}}}
	if v := set.Evaluate(change, reads.facts); v != nil {
		t.Fatalf("the namespace says env=prod (the claim's own label says dev): %+v", v)
	}

	ignores := &resourceScope{res: res, class: classWith("claim.labels['env'] == 'dev'")}
	if err := r.preparePolicy(context.Background(), ignores); err != nil {
		t.Fatal(err)
	}
	if ignores.facts.Namespace.Name != "" || ignores.facts.Namespace.Labels != nil {
		t.Fatalf("no rule reads the namespace, yet the facts carry %+v", ignores.facts.Namespace)
	}
	// The digest of such facts is the one a manager before the field wrote.
	before := struct{ Claim, Class, Resource policy.Object }{ignores.facts.Claim, ignores.facts.Class, ignores.facts.Resource}
	b, _ := json.Marshal([]any{ignores.policy, before})
	sum := sha256.Sum256(b)
	if got, want := policyDigest(ignores.policy, ignores.facts), hex.EncodeToString(sum[:])[:12]; got != want {
		t.Fatalf("digest %s, the old encoding's %s: every held plan would be planned again", got, want)
	}
	// A namespace label a rule reads changes the digest: the held plan is planned again.
	relabelled := reads.facts
	relabelled.Namespace = policy.Object{Name: "shop", Labels: map[string]string{"env": "dev"}}
	if policyDigest(reads.policy, relabelled) == policyDigest(reads.policy, reads.facts) {
		t.Fatal("a namespace label a rule reads changed, and the digest did not")
	}
}
