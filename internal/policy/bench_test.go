package policy

import (
	"fmt"
	"testing"
)

// BenchmarkEvaluate1000Changes is issue 49's figure: one plan of 1,000 resource changes (buckets
// and database instances, as show -json writes them) through three rules of the samples' kind
// and the destructive-change guard. Run: make bench (or go test -bench Evaluate ./internal/policy).
func BenchmarkEvaluate1000Changes(b *testing.B) {
	set, err := Compile([]Rule{
		{Name: "no-public-buckets", Action: ActionDeny,
			Expression: "change.type != 'google_storage_bucket' || (has(change.after.public_access_prevention) && change.after.public_access_prevention == 'enforced')"},
		{Name: "rds-classes", Action: ActionDeny,
			Expression: "change.type != 'aws_db_instance' || change.after == null || change.after.instance_class in ['db.t4g.micro', 'db.t4g.small', 'db.m7g.large']"},
		{Name: "database-replace", Action: ActionRequireApproval,
			Expression: "change.type != 'aws_db_instance' || !('delete' in change.actions)"},
		DestructiveChange,
	})
	if err != nil {
		b.Fatal(err)
	}
	var p Plan
	for i := range 1000 {
		if i%2 == 0 {
			p.Changes = append(p.Changes, bucket(fmt.Sprintf("b%d", i), i%10 == 0))
			continue
		}
		p.Changes = append(p.Changes, Change{Address: fmt.Sprintf("aws_db_instance.d%d", i), Type: "aws_db_instance",
			Actions: []string{"update"}, Before: map[string]any{"instance_class": "db.t4g.micro"},
			After: map[string]any{"instance_class": "db.t4g.small", "allocated_storage": float64(20)}})
	}
	facts := Facts{Claim: Object{Namespace: "shop", Name: "web", Labels: map[string]string{"team": "a"}}, Class: Object{Name: "gcs"}}
	b.ReportAllocs()
	for b.Loop() {
		if v := set.Evaluate(p, facts); len(v) != 1 || len(v[0].Addresses) != 100 {
			b.Fatalf("violations: %+v", v)
		}
	}
}
