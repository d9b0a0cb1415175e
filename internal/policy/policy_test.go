package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// bucket is a google_storage_bucket change as `terraform show -json` writes it.
func bucket(name string, public bool) Change {
	access := "enforced"
	if public {
		access = "inherited"
	}
	return Change{Address: "google_storage_bucket." + name, Mode: "managed", Type: "google_storage_bucket", Name: name,
		ProviderName: "registry.opentofu.org/hashicorp/google", Actions: []string{"create"},
		After: map[string]any{"name": name, "public_access_prevention": access, "location": "EU"}}
}

func TestCompileRefusesWhatCannotRun(t *testing.T) {
	for _, tc := range []struct {
		rule Rule
		want string
	}{
		{Rule{Name: "syntax", Expression: "change.type ==", Action: ActionDeny}, "Syntax error"},
		{Rule{Name: "not-bool", Expression: "change.address", Action: ActionDeny}, "not bool"},
		{Rule{Name: "typo", Expression: "change.afer.acl == 'private'", Action: ActionDeny}, `change has no key "afer"`},
		{Rule{Name: "no-var", Expression: "secret.data == 'x'", Action: ActionDeny}, "undeclared reference to 'secret'"},
		{Rule{Name: "action", Expression: "true", Action: "Warn"}, `action "Warn"`},
		{Rule{Expression: "true", Action: ActionDeny}, "needs a name"},
		{Rule{Name: "empty", Expression: " ", Action: ActionDeny}, "empty"},
		{Rule{Name: "long", Expression: "true || " + strings.Repeat("true || ", MaxExpressionLength/8) + "true", Action: ActionDeny}, "longer than"},
	} {
		_, err := Compile([]Rule{{Name: "fine", Expression: "true", Action: ActionDeny}, tc.rule})
		var ce *CompileError
		if !errors.As(err, &ce) || ce.Index != 1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want a CompileError of rule 1 saying %q", tc.rule.Name, err, tc.want)
		}
	}
}

func TestEvaluateNamesRulesAndAddresses(t *testing.T) {
	set, err := Compile([]Rule{
		{Name: "no-public-buckets", Action: ActionDeny, Message: "buckets must prevent public access",
			Expression: "change.type != 'google_storage_bucket' || change.after.public_access_prevention == 'enforced'"},
		{Name: "eu-only", Action: ActionRequireApproval,
			Expression: "change.type != 'google_storage_bucket' || change.after.location == 'EU'"},
		{Name: "team-label", Action: ActionDeny, Message: "claims need a team label",
			Expression: "'team' in claim.labels"},
	})
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{Changes: []Change{bucket("private", false), bucket("site", true), bucket("logs", true)}}
	got := set.Evaluate(plan, Facts{Claim: Object{Namespace: "shop", Name: "web", Labels: map[string]string{"team": "a"}}})
	if len(got) != 1 || got[0].Rule.Name != "no-public-buckets" ||
		!slices.Equal(got[0].Addresses, []string{"google_storage_bucket.site", "google_storage_bucket.logs"}) {
		t.Fatalf("violations = %+v, want no-public-buckets on site and logs", got)
	}
	if want := "rule no-public-buckets: buckets must prevent public access (google_storage_bucket.site, google_storage_bucket.logs)"; got[0].Message() != want {
		t.Errorf("message = %q, want %q", got[0].Message(), want)
	}
	// The claim's labels reach the rule: without team, every change breaks team-label.
	got = set.Evaluate(Plan{Changes: []Change{bucket("private", false)}}, Facts{Claim: Object{Namespace: "shop", Name: "web"}})
	if len(got) != 1 || got[0].Rule.Name != "team-label" || got[0].Rule.Action != ActionDeny {
		t.Errorf("violations = %+v, want team-label", got)
	}
	if got := set.Evaluate(Plan{Changes: []Change{bucket("private", false)}}, Facts{Claim: Object{Labels: map[string]string{"team": "a"}}}); got != nil {
		t.Errorf("a plan that passes: %+v", got)
	}
}

func TestEvaluationErrorsBreakTheRule(t *testing.T) {
	set, err := Compile([]Rule{{Name: "acl", Action: ActionDeny, Expression: "change.after.acl == 'private'"}})
	if err != nil {
		t.Fatal(err)
	}
	got := set.Evaluate(Plan{Changes: []Change{bucket("b", false)}}, Facts{})
	if len(got) != 1 || len(got[0].Errors) != 1 || !strings.Contains(got[0].Errors[0], "no such key: acl") {
		t.Fatalf("violations = %+v, want acl broken with the evaluation's error", got)
	}
	if !strings.Contains(got[0].Message(), "could not evaluate google_storage_bucket.b: no such key: acl") {
		t.Errorf("message = %q", got[0].Message())
	}
}

func TestCostLimitStopsAnExpensiveRule(t *testing.T) {
	ten := "[0,1,2,3,4,5,6,7,8,9]"
	expr := "change.address != ''"
	for i := 0; i < 7; i++ { // 10^7 iterations, far over the limit
		expr = fmt.Sprintf("%s.all(x%d, %s)", ten, i, expr)
	}
	set, err := Compile([]Rule{{Name: "costly", Action: ActionDeny, Expression: expr}})
	if err != nil {
		t.Fatal(err)
	}
	got := set.Evaluate(Plan{Changes: []Change{bucket("b", false)}}, Facts{})
	if len(got) != 1 || len(got[0].Errors) != 1 || !strings.Contains(got[0].Errors[0], "cost limit exceeded") {
		t.Fatalf("violations = %+v, want costly broken by its cost limit", got)
	}
}

func TestDestructiveChangeRule(t *testing.T) {
	set, err := Compile([]Rule{DestructiveChange})
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{Changes: []Change{
		{Address: "a", Actions: []string{"create"}}, {Address: "b", Actions: []string{"update"}},
		{Address: "c", Actions: []string{"delete", "create"}}, {Address: "d", Actions: []string{"create", "delete"}},
		{Address: "e", Actions: []string{"delete"}},
	}}
	got := set.Evaluate(plan, Facts{})
	if len(got) != 1 || !slices.Equal(got[0].Addresses, []string{"c", "d", "e"}) {
		t.Errorf("violations = %+v, want c, d and e", got)
	}
}

func TestPlanVariableSeesEveryChange(t *testing.T) {
	// A rule over the whole plan: at most two buckets per plan (broken by every change).
	set, err := Compile([]Rule{{Name: "two", Action: ActionDeny,
		Expression: "plan.changes.filter(c, c.type == 'google_storage_bucket').size() <= 2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Evaluate(Plan{Changes: []Change{bucket("a", false), bucket("b", false)}}, Facts{}); got != nil {
		t.Errorf("two buckets: %+v", got)
	}
	if got := set.Evaluate(Plan{Changes: []Change{bucket("a", false), bucket("b", false), bucket("c", false)}}, Facts{}); len(got) != 1 || len(got[0].Addresses) != 3 {
		t.Errorf("three buckets: %+v", got)
	}
}

// Issue 65 item 8: the cost of a plan's evaluations is bounded as a whole, not only per change. A
// rule that costs about two thirds of PerChangeCostLimit on each change (about 650,000 units) passes a
// plan of 35 such changes on the old code (22.9 million units, unbounded); now the changes after the
// plan's budget is spent break the rule, and the first ones still pass. A done context breaks it
// as well.
func TestPlanCostBudgetBoundsAWholePlan(t *testing.T) {
	ten := "[0,1,2,3,4,5,6,7,8,9]"
	expr := "change.address != ''"
	for i := 0; i < 5; i++ { // 10^5 iterations: under the per-change limit
		expr = fmt.Sprintf("%s.all(x%d, %s)", ten, i, expr)
	}
	set, err := Compile([]Rule{{Name: "heavy", Action: ActionDeny, Expression: expr}})
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Evaluate(Plan{Changes: []Change{bucket("one", false)}}, Facts{}); got != nil {
		t.Fatalf("one change: %+v, want it to pass (the rule is under the per-change limit)", got)
	}
	var plan Plan
	for i := range 35 {
		plan.Changes = append(plan.Changes, bucket(fmt.Sprintf("b%d", i), false))
	}
	got := set.Evaluate(plan, Facts{})
	if len(got) != 1 || len(got[0].Addresses) == 0 || len(got[0].Addresses) == 35 ||
		len(got[0].Errors) == 0 || !strings.Contains(got[0].Errors[0], "cost budget") {
		t.Fatalf("violations = %+v, want the changes after the budget broken and the first ones passed", got)
	}
	if got[0].Addresses[0] == plan.Changes[0].Address {
		t.Fatal("the first change broke the rule: the budget is spent before any")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := set.EvaluateContext(ctx, Plan{Changes: []Change{bucket("one", false)}}, Facts{}); len(got) != 1 {
		t.Fatalf("a done context: %+v, want the rule broken", got)
	}
}

// Issue 65 item 8: the namespaceObject variable (name, labels; `namespace` is reserved in CEL,
// and ValidatingAdmissionPolicy names its variable so too) is what a rule reads of the claim's
// namespace; it has no other key, and ReadsNamespace finds it anywhere in an expression.
func TestNamespaceVariable(t *testing.T) {
	set, err := Compile([]Rule{{Name: "prod-only-eu", Action: ActionDeny,
		Expression: "!('env' in namespaceObject.labels) || namespaceObject.labels['env'] != 'prod' || change.after.location == 'EU'"}})
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{Changes: []Change{{Address: "b.us", Type: "bucket", After: map[string]any{"location": "US"}, Actions: []string{"create"}}}}
	prod := Facts{Claim: Object{Namespace: "shop", Name: "web", Labels: map[string]string{"env": "dev"}},
		Namespace: Object{Name: "shop", Labels: map[string]string{"env": "prod"}}}
	if v := set.Evaluate(plan, prod); len(v) != 1 {
		t.Fatalf("a prod namespace's US bucket passed (the claim's own env=dev label must not decide): %+v", v)
	}
	if v := set.Evaluate(plan, Facts{}); v != nil {
		t.Fatalf("no namespace (a resource with no claim): %+v", v)
	}
	if _, err := Compile([]Rule{{Name: "x", Action: ActionDeny, Expression: "namespaceObject.annotations.size() == 0"}}); err == nil ||
		!strings.Contains(err.Error(), `namespaceObject has no key "annotations"`) {
		t.Fatalf("namespaceObject.annotations compiled: %v", err)
	}
	for expr, want := range map[string]bool{
		"namespaceObject.labels['env'] == 'prod'":            true,
		"plan.changes.all(c, has(namespaceObject.labels.a))": true,
		"claim.namespace == 'shop'":                          false,
		"'namespace' in claim.labels":                        false,
	} {
		if got := ReadsNamespace([]Rule{{Name: "r", Expression: expr}}); got != want {
			t.Errorf("ReadsNamespace(%s) = %v, want %v", expr, got, want)
		}
	}
}

// Issue 68: cost is the resource's estimated monthly cost, a double, compared with int and double
// literals alike; ReadsCost finds it, and a rule that does not read it sees 0.0.
func TestCostVariable(t *testing.T) {
	set, err := Compile([]Rule{{Name: "dear-needs-approval", Action: ActionRequireApproval,
		Expression: "cost <= 300 || claim.labels['cost-approved'] == 'true'"}})
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan{Changes: []Change{{Address: "db.this", Type: "db", Actions: []string{"create"}}}}
	if v := set.Evaluate(plan, Facts{Cost: 412.5}); len(v) != 1 {
		t.Fatalf("a resource of 412.50 a month passed: %+v", v)
	}
	if v := set.Evaluate(plan, Facts{Cost: 412.5, Claim: Object{Labels: map[string]string{"cost-approved": "true"}}}); v != nil {
		t.Fatalf("an approved cost was held: %+v", v)
	}
	if v := set.Evaluate(plan, Facts{Cost: 299.99}); v != nil {
		t.Fatalf("a resource under the bound was held: %+v", v)
	}
	if _, err := Compile([]Rule{{Name: "x", Action: ActionDeny, Expression: "cost.monthly > 1.0"}}); err == nil {
		t.Fatal("cost is a double, not an object: cost.monthly compiled")
	}
	for expr, want := range map[string]bool{"cost > 10.0": true, "claim.labels['cost'] == 'x'": false, "'cost' in claim.labels": false} {
		if got := ReadsCost([]Rule{{Name: "r", Expression: expr}}); got != want {
			t.Errorf("ReadsCost(%s) = %v, want %v", expr, got, want)
		}
	}
}
