package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/policy"
)

// sampleClasses decodes the InfraClasses of a file in config/samples, by name.
func sampleClasses(t *testing.T, file string) map[string]*v1alpha1.InfraClass {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*v1alpha1.InfraClass{}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var c v1alpha1.InfraClass
		if err := yaml.UnmarshalStrict(doc, &c); err != nil || c.Kind != "InfraClass" {
			continue
		}
		out[c.Name] = &c
	}
	return out
}

// TestSamplePolicies: the samples' plan rules compile, and each allows and refuses what it says,
// on changes as `terraform show -json` writes them for the google and aws providers (those
// providers are the heavy optional builds: these plans are written out, not planned).
func TestSamplePolicies(t *testing.T) {
	bucket := func(prevention any) policy.Change {
		after := map[string]any{"name": "conductor-b", "location": "EU", "storage_class": "STANDARD"}
		if prevention != nil {
			after["public_access_prevention"] = prevention
		}
		return policy.Change{Address: "module.main.google_storage_bucket.this", Type: "google_storage_bucket", Actions: []string{"create"}, After: after}
	}
	member := func(who string) policy.Change {
		return policy.Change{Address: "module.main.google_storage_bucket_iam_member.read", Type: "google_storage_bucket_iam_member",
			Actions: []string{"create"}, After: map[string]any{"bucket": "conductor-b", "role": "roles/storage.objectViewer", "member": who}}
	}
	db := func(class string, actions ...string) policy.Change {
		return policy.Change{Address: "module.main.aws_db_instance.this", Type: "aws_db_instance", Actions: actions,
			Before: map[string]any{"instance_class": "db.t3.medium"}, After: map[string]any{"instance_class": class, "allocated_storage": float64(20)}}
	}
	classes := sampleClasses(t, "bucket_class.yaml")
	for name, c := range sampleClasses(t, "database_classes.yaml") {
		classes[name] = c
	}
	for _, tc := range []struct {
		class  string
		change policy.Change
		broken []string // rule names, in order; none when the change passes
	}{
		{"gcs-standard", bucket("enforced"), nil},
		{"gcs-standard", bucket("inherited"), []string{"no-public-buckets"}},
		{"gcs-standard", bucket(nil), []string{"no-public-buckets"}},
		{"gcs-standard", member("group:team@example.com"), nil},
		{"gcs-standard", member("allUsers"), []string{"no-public-buckets"}},
		{"gcs-standard", member("allAuthenticatedUsers"), []string{"no-public-buckets"}},
		{"standard", db("db.t3.medium", "update"), nil},
		{"standard", db("db.m5.24xlarge", "update"), []string{"instance-classes"}},
		{"standard", db("db.t3.medium", "delete", "create"), []string{"database-replace"}},
		{"performance", db("db.r6g.large", "create"), nil},
		{"performance", db("db.x2g.16xlarge", "delete", "create"), []string{"instance-classes", "database-replace"}},
	} {
		c := classes[tc.class]
		if c == nil || c.Spec.Policy == nil {
			t.Fatalf("sample class %s has no plan policy", tc.class)
		}
		if err := provision.CheckClassPolicy(c); err != nil {
			t.Fatalf("class %s: %v", tc.class, err)
		}
		set, err := policy.Compile(provision.PolicyRules(c))
		if err != nil {
			t.Fatal(err)
		}
		var broken []string
		for _, v := range set.Evaluate(policy.Plan{Changes: []policy.Change{tc.change}}, policy.Facts{Class: policy.Object{Name: c.Name}}) {
			broken = append(broken, v.Rule.Name)
			if len(v.Errors) > 0 {
				t.Errorf("class %s, %s: rule %s failed to evaluate: %v", tc.class, tc.change.Address, v.Rule.Name, v.Errors)
			}
		}
		if !slices.Equal(broken, tc.broken) {
			t.Errorf("class %s, %s %v after %v: broke %v, want %v", tc.class, tc.change.Address, tc.change.Actions, tc.change.After, broken, tc.broken)
		}
	}
}
