package resource

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/policy"
)

// Issue 68: discovery's rules, on the plans they are for. A discovered object's first plan passes
// only when it imports and changes nothing; a destroy is refused outright (no approval applies
// it); a listing's plan may change nothing. After the first apply, the rules are gone.
func TestDiscoveryRules(t *testing.T) {
	noop := policy.Change{Address: "module.main.kubernetes_config_map_v1.this", Actions: []string{"no-op"}, Importing: true}
	update := policy.Change{Address: "module.main.kubernetes_config_map_v1.this", Actions: []string{"update"}}
	create := policy.Change{Address: "module.main.kubernetes_config_map_v1.extra", Actions: []string{"create"}}
	replace := policy.Change{Address: "module.main.kubernetes_config_map_v1.this", Actions: []string{"delete", "create"}}
	discovered := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelDiscoveredBy: "cm"}}}
	listing := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelDiscoveryOf: "cm"}}}
	applied := discovered.DeepCopy()
	applied.Status.ObservedGeneration = 1
	cases := []struct {
		name    string
		res     *v1alpha1.InfraResource
		changes []policy.Change
		want    []string // the rules broken, in order
	}{
		{"import only: passes", discovered, []policy.Change{noop}, nil},
		{"an update of what was found: held", discovered, []policy.Change{update}, []string{"discovered-import-only"}},
		{"a create beside it: held", discovered, []policy.Change{noop, create}, []string{"discovered-import-only"}},
		{"a replace: refused, and held", discovered, []policy.Change{replace}, []string{"discovered-no-destroy", "discovered-import-only"}},
		{"after the first apply: no discovery rule", applied, []policy.Change{update}, nil},
		{"a listing that would create: refused", listing, []policy.Change{create}, []string{"discovery-read-only"}},
		{"a listing that only reads: passes", listing, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, err := policy.Compile(discoveryRules(tc.res))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range set.Evaluate(policy.Plan{Changes: tc.changes}, policy.Facts{}) {
				got = append(got, v.Rule.Name)
				if v.Rule.Name == DiscoveredNoDestroy.Name && v.Rule.Action != policy.ActionDeny {
					t.Fatal("a destroy of a discovered object must be refused, not approvable")
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("broken %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("broken %v, want %v", got, tc.want)
				}
			}
		})
	}
}
