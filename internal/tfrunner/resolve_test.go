package tfrunner

import (
	"context"
	"errors"
	"testing"
)

// fakeImporter answers imports from a table of existing objects, as a provider would.
type fakeImporter struct {
	exists map[string]bool // by ID
	broken map[string]bool // by ID: the provider fails
	calls  []string
}

func (f *fakeImporter) Import(_ context.Context, address, id string) error {
	f.calls = append(f.calls, address+"="+id)
	switch {
	case f.broken[id]:
		return &RunError{Op: "import", Message: "Error: Unauthorized"}
	case !f.exists[id]:
		return &RunError{Op: "import", Message: "Error: Cannot import non-existent remote object\n\nWhile attempting to import..."}
	}
	return nil
}

// The decision table of interrupted creates (issue 35), as built.
func TestResolveCreates(t *testing.T) {
	gate := &Gate{
		ResolveCreates: true,
		CreatesInDoubt: []string{
			"module.main.kubernetes_secret_v1.exists",  // identity, object found → adopted
			"module.main.kubernetes_secret_v1.missing", // identity, no object → retried
			"module.main.kubernetes_secret_v1.broken",  // identity, provider fails → held
			"module.main.local_file.anything",          // no identity → held
			"module.main.terraform_data.exec",          // recorded at its provisioner's start → held
			"module.main.kubernetes_secret_v1.stored",  // in state (a replace's old object, or the new one): left to the gate
		},
		Identities: map[string]string{
			"module.main.kubernetes_secret_v1.exists":  "ns/a",
			"module.main.kubernetes_secret_v1.missing": "ns/b",
			"module.main.kubernetes_secret_v1.broken":  "ns/c",
			"module.main.kubernetes_secret_v1.stored":  "ns/d",
		},
	}
	imp := &fakeImporter{exists: map[string]bool{"ns/a": true, "ns/d": true}, broken: map[string]bool{"ns/c": true}}
	got, held, err := resolveCreates(context.Background(), imp, gate, []string{"module.main.kubernetes_secret_v1.stored"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"module.main.kubernetes_secret_v1.exists":  CreateAdopted,
		"module.main.kubernetes_secret_v1.missing": CreateRetried,
		"module.main.kubernetes_secret_v1.broken":  CreateHeld,
		"module.main.local_file.anything":          CreateHeld,
		"module.main.terraform_data.exec":          CreateHeld,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d decisions %+v, want %d", len(got), got, len(want))
	}
	for _, r := range got {
		if want[r.Address] != r.Decision {
			t.Errorf("%s: %s (%s), want %s", r.Address, r.Decision, r.Detail, want[r.Address])
		}
	}
	wantHeld := []string{"module.main.kubernetes_secret_v1.broken", "module.main.local_file.anything", "module.main.terraform_data.exec",
		"module.main.kubernetes_secret_v1.stored"}
	if !sameElements(held, wantHeld) {
		t.Errorf("held %v, want %v", held, wantHeld)
	}
	if len(imp.calls) != 3 {
		t.Errorf("imports %v: only the three addresses with identities not in state are tried", imp.calls)
	}
}

func TestResolveCreatesStopsOnlyOnTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gate := &Gate{ResolveCreates: true, CreatesInDoubt: []string{"module.main.x_y.z"}, Identities: map[string]string{"module.main.x_y.z": "id"}}
	_, _, err := resolveCreates(ctx, &fakeImporter{}, gate, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

func sameElements(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		if seen[x]--; seen[x] < 0 {
			return false
		}
	}
	return true
}
