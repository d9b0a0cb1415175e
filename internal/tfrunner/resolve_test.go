package tfrunner

import (
	"context"
	"errors"
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// fakeImporter answers imports from a table of existing objects, as a provider would.
type fakeImporter struct {
	exists map[string]bool   // by ID
	broken map[string]bool   // by ID: the provider fails
	marks  map[string]string // ownership marks by ID
	calls  []string
	state  map[string]string // address → ID imported and still in state
}

func (f *fakeImporter) OwnershipMark(_ context.Context, address string) (string, bool, error) {
	m, ok := f.marks[f.state[address]]
	return m, ok, nil
}

func (f *fakeImporter) Forget(_ context.Context, address string) error {
	delete(f.state, address)
	return nil
}

func (f *fakeImporter) Import(_ context.Context, address, id string) error {
	f.calls = append(f.calls, address+"="+id)
	switch {
	case f.broken[id]:
		return &RunError{Op: "import", Message: "Error: Unauthorized"}
	case !f.exists[id]:
		return &RunError{Op: "import", Message: "Error: Cannot import non-existent remote object\n\nWhile attempting to import..."}
	}
	if f.state == nil {
		f.state = map[string]string{}
	}
	f.state[address] = id
	return nil
}

// Issue 46: an object adopted by its identity whose ownership mark names another resource is given
// back (removed from state) and held; one marked for this resource, or unmarked, is adopted.
func TestResolveCreatesChecksOwnershipMarks(t *testing.T) {
	gate := &Gate{
		ResolveCreates: true, Owner: "db-1a2b3",
		CreatesInDoubt: []string{"module.main.a.mine", "module.main.a.theirs", "module.main.a.unmarked"},
		Identities:     map[string]string{"module.main.a.mine": "ns/m", "module.main.a.theirs": "ns/t", "module.main.a.unmarked": "ns/u"},
	}
	imp := &fakeImporter{exists: map[string]bool{"ns/m": true, "ns/t": true, "ns/u": true},
		marks: map[string]string{"ns/m": "db-1a2b3", "ns/t": "db-4d5e6"}}
	got, held, err := resolveCreates(context.Background(), imp, gate, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"module.main.a.mine": CreateAdopted, "module.main.a.theirs": CreateHeld, "module.main.a.unmarked": CreateAdopted}
	for _, r := range got {
		if want[r.Address] != r.Decision {
			t.Errorf("%s: %s (%s), want %s", r.Address, r.Decision, r.Detail, want[r.Address])
		}
	}
	if !sameElements(held, []string{"module.main.a.theirs"}) {
		t.Errorf("held %v", held)
	}
	if _, still := imp.state["module.main.a.theirs"]; still {
		t.Error("another resource's object stayed in this resource's state")
	}
}

// ownershipMark finds the mark where the providers keep labels and tags.
func TestOwnershipMark(t *testing.T) {
	for _, c := range []struct {
		attrs map[string]any
		want  string
	}{
		{map[string]any{"metadata": []any{map[string]any{"labels": map[string]any{"conductor.io/resource": "r1"}}}}, "r1"},
		{map[string]any{"tags": map[string]any{"conductor.io/resource": "r2", "Name": "x"}}, "r2"},
		{map[string]any{"labels": map[string]any{"conductor-resource": "r3"}}, "r3"},
		{map[string]any{"tags": map[string]any{"Name": "x"}}, ""},
		{map[string]any{"metadata": []any{}}, ""},
	} {
		if got, ok := ownershipMark(c.attrs); got != c.want || ok != (c.want != "") {
			t.Errorf("ownershipMark(%v) = %q, %v; want %q", c.attrs, got, ok, c.want)
		}
	}
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

// Unrecorded creates (a run that died during its apply): every identity whose object is not in
// state is tried, and the mark itself stays in doubt for the gate.
func TestResolveCreatesUnrecorded(t *testing.T) {
	gate := &Gate{
		ResolveCreates: true,
		CreatesInDoubt: []string{v1alpha1.CreatesUnrecorded},
		Identities: map[string]string{
			"module.main.kubernetes_secret_v1.exists":  "ns/a",
			"module.main.kubernetes_secret_v1.missing": "ns/b",
			"module.main.kubernetes_secret_v1.stored":  "ns/d",
		},
	}
	imp := &fakeImporter{exists: map[string]bool{"ns/a": true, "ns/d": true}}
	got, held, err := resolveCreates(context.Background(), imp, gate, []string{"module.main.kubernetes_secret_v1.stored"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Resolution{
		{Address: "module.main.kubernetes_secret_v1.exists", Decision: CreateAdopted, ID: "ns/a"},
		{Address: "module.main.kubernetes_secret_v1.missing", Decision: CreateRetried, ID: "ns/b"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Address != want[i].Address || got[i].Decision != want[i].Decision || got[i].ID != want[i].ID {
			t.Errorf("decision %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if !sameElements(held, []string{v1alpha1.CreatesUnrecorded}) {
		t.Errorf("held %v, want only the mark", held)
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
