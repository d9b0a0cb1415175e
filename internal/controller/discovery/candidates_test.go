package discovery

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func TestParseCandidates(t *testing.T) {
	cases := []struct {
		name, raw, bad string
		n              int
	}{
		{"a listing", `[{"id":"ns/a","import_ids":{"kubernetes_config_map_v1.this":"ns/a"},"variables":{"name":"a"},"capacity":{"storage":"1Gi"}}]`, "", 1},
		{"none found", `[]`, "", 0},
		{"not a list", `{"id":"x"}`, "is not a list of candidates", 0},
		{"no id", `[{"import_ids":{"a.b":"x"}}]`, "candidate 0 has no id", 0},
		{"an id twice", `[{"id":"x","import_ids":{"a.b":"x"}},{"id":"x","import_ids":{"a.b":"y"}}]`, `candidate id "x" is listed twice`, 0},
		{"nothing to import", `[{"id":"x","variables":{}}]`, `candidate "x" has no import_ids`, 0},
		{"an empty import ID", `[{"id":"x","import_ids":{"a.b":""}}]`, "must be 1 to 1024 characters", 0},
		{"a capacity that is no quantity", `[{"id":"x","import_ids":{"a.b":"x"},"capacity":{"storage":"lots"}}]`, `capacity storage="lots" is not a quantity`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCandidates([]byte(tc.raw))
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("got %v, want an error with %q", err, tc.bad)
				}
				return
			}
			if err != nil || len(got) != tc.n {
				t.Fatalf("got %d, %v; want %d", len(got), err, tc.n)
			}
		})
	}
	many := "[" + strings.Repeat(`{"id":"x","import_ids":{"a.b":"x"}},`, MaxCandidates) + `{"id":"y","import_ids":{"a.b":"y"}}]`
	if _, err := ParseCandidates([]byte(many)); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a listing over MaxCandidates: %v", err)
	}
}

// Names are valid object names, stable per id, distinct per id, and short enough for a long class.
func TestResourceNames(t *testing.T) {
	long := strings.Repeat("c", 253)
	for _, class := range []string{"configmaps", long} {
		a, b := ResourceName(class, "ns/a"), ResourceName(class, "ns/b")
		if a == b || a != ResourceName(class, "ns/a") {
			t.Fatalf("names %s, %s", a, b)
		}
		for _, n := range []string{a, ListingName(class)} {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Fatalf("%s: %v", n, errs)
			}
		}
	}
}

// desired: what a candidate becomes, whatever the class provisions with: Retain, no generated
// passwords, the listing's variables, imports and identities.
func TestDesired(t *testing.T) {
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "pg"}, Spec: v1alpha1.InfraClassSpec{
		ResourceKind: "Database", ReclaimPolicy: v1alpha1.ReclaimDelete, Capabilities: map[string]string{"engine": "pg"},
		RunInputs: v1alpha1.RunInputs{GeneratedPasswords: []v1alpha1.GeneratedPassword{{Variable: "password"}}}}}
	cands, err := ParseCandidates([]byte(`[{"id":"db-1","import_ids":{"b.y":"2","a.x":"1"},"variables":{"name":"db-1"},"capabilities":{"zone":"a"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	res := desired(class, cands[0])
	switch {
	case res.Spec.ReclaimPolicy != v1alpha1.ReclaimRetain:
		t.Fatalf("reclaim %s: a discovered object is never destroyed by a reclaim", res.Spec.ReclaimPolicy)
	case res.Spec.GeneratedPasswords != nil:
		t.Fatal("a discovered object got the class's generated passwords")
	case len(res.Spec.Import) != 2 || res.Spec.Import[0].Address != "a.x" || res.Spec.ImportIdentities["b.y"] != "2":
		t.Fatalf("imports %+v, identities %v", res.Spec.Import, res.Spec.ImportIdentities)
	case res.Spec.Capabilities["engine"] != "pg" || res.Spec.Capabilities["zone"] != "a" || class.Spec.Capabilities["zone"] != "":
		t.Fatalf("capabilities %v (class's %v)", res.Spec.Capabilities, class.Spec.Capabilities)
	case res.Labels[v1alpha1.LabelDiscoveredBy] != "pg" || res.Annotations[v1alpha1.AnnotationDiscoveryID] != "db-1":
		t.Fatalf("labels %v annotations %v", res.Labels, res.Annotations)
	}
}
