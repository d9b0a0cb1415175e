package render

import (
	"encoding/json"
	"testing"
)

// Issue 46: import identity templates that two resources can render alike are refused; those that
// name the resource so that it reads back from the ID are accepted, and render distinct IDs for
// the claims that collide under the old samples (a/b-c and a-b/c).
func TestCheckIdentity(t *testing.T) {
	cases := []struct {
		tmpl string
		ok   bool
	}{
		{"${resource.name}", true},
		{"minio-${resource.name}", true},
		{"minio-${resource.name}/${claim.name}-data", true},
		{"${claim.namespace}/${resource.name}-token", true},
		{"apiVersion=minio.rook.io/v1alpha1,kind=ObjectStore,namespace=minio-${resource.name},name=${claim.name}", true},
		{"${resource.name}-${claim.name}-${resource.name}", false}, // perhaps unique, but not provably by the rule: refused
		{"${claim.namespace}-${claim.name}", false},
		{`${substr("minio-${claim.namespace}-${claim.name}", 0, 63)}`, false},
		{`${substr("minio-${resource.name}", 0, 20)}`, false},
		{"${claim.name}-${resource.name}", false},
		{"${resource.name}-${claim.name}", false},
		{"${claim.name}-${resource.name}-${claim.namespace}", false},
		{"${upper(resource.name)}", false},
		{"${resource.name", false},
	}
	for _, c := range cases {
		err := CheckIdentity(c.tmpl)
		if (err == nil) != c.ok {
			t.Errorf("CheckIdentity(%q) = %v; want accepted %v", c.tmpl, err, c.ok)
		}
	}

	// Accepted templates render distinct IDs where claim fields collide.
	type pair struct{ ns, claim, res string }
	pairs := []pair{{"a", "b-c", "b-c-1a2b3"}, {"a-b", "c", "c-4d5e6"}, {"a", "b-c", "b-c-4d5e6"}}
	for _, c := range cases {
		if !c.ok {
			continue
		}
		seen := map[string]pair{}
		for _, p := range pairs {
			raw, _ := json.Marshal(c.tmpl)
			tmpl, err := Compile(map[string][]byte{"id": raw})
			if err != nil {
				t.Fatal(err)
			}
			ctx, err := Context(Claim{Name: p.claim, Namespace: p.ns}, Class{}, Resource{Name: p.res})
			if err != nil {
				t.Fatal(err)
			}
			out, err := tmpl.Render(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id := out["id"].AsString()
			if other, dup := seen[id]; dup {
				t.Errorf("%q renders %q for both %+v and %+v", c.tmpl, id, other, p)
			}
			seen[id] = p
		}
	}
}
