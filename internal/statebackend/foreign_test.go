package statebackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNestState: every resource moves one module down, under module.main; numbers, lineage,
// serial and outputs stay as written; check results go.
func TestNestState(t *testing.T) {
	in := `{"version":4,"terraform_version":"1.12.6","serial":7,"lineage":"abc","outputs":{"name":{"value":"x","type":"string"}},
"resources":[
 {"mode":"managed","type":"random_pet","name":"this","provider":"provider[\"registry.terraform.io/hashicorp/random\"]","instances":[{"schema_version":0,"attributes":{"length":2,"id":"x"}}]},
 {"module":"module.db","mode":"managed","type":"random_id","name":"big","provider":"provider[\"registry.terraform.io/hashicorp/random\"]","instances":[{"attributes":{"byte_length":12345678901234567890}}]}
],"check_results":[{"object_kind":"resource","config_addr":"random_pet.this","status":"pass"}]}`
	out, err := NestState([]byte(in), "main")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Serial       int64            `json:"serial"`
		Lineage      string           `json:"lineage"`
		Outputs      map[string]any   `json:"outputs"`
		Resources    []map[string]any `json:"resources"`
		CheckResults []any            `json:"check_results"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Serial != 7 || doc.Lineage != "abc" || doc.Outputs["name"] == nil || doc.CheckResults != nil {
		t.Errorf("serial %d lineage %q outputs %v check_results %v", doc.Serial, doc.Lineage, doc.Outputs, doc.CheckResults)
	}
	if got := []any{doc.Resources[0]["module"], doc.Resources[1]["module"]}; got[0] != "module.main" || got[1] != "module.main.module.db" {
		t.Errorf("modules = %v", got)
	}
	if !strings.Contains(string(out), "12345678901234567890") {
		t.Errorf("a large number was not kept as written:\n%s", out)
	}

	for _, bad := range []string{`{"version":3,"resources":[]}`, `not json`} {
		if _, err := NestState([]byte(bad), "main"); err == nil {
			t.Errorf("NestState(%s) succeeded", bad)
		}
	}
}

// TestCopyForeign copies a chunked state of another namespace as an orphaned state the adopt
// path accepts, nested under module.main; again it finds its copy; a copy of another state for
// the same resource, and a Secret that is no state, are refused.
func TestCopyForeign(t *testing.T) {
	ctx := context.Background()
	theirs, ours := newNamespace(t), newNamespace(t)
	big := stateJSON(t, "lin-f", 3, map[string]int{"big": 3 << 20})
	if err := writeStateJSON(ctx, testKube, theirs, "default", "legacy", nil, big); err != nil {
		t.Fatal(err)
	}
	f := ForeignState{Namespace: theirs, Workspace: "default", Suffix: "legacy"}
	name, err := CopyForeign(ctx, testKube, f, ours, "res", "main")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := CopyForeign(ctx, testKube, f, ours, "res", "main"); err != nil || again != name {
		t.Errorf("copying again: %q, %v; want %q", again, err, name)
	}
	want, _ := NestState(big, "main")
	got, found, err := readStateJSON(ctx, testKube, ours, "default", SuffixOf(name))
	if err != nil || !found || !bytes.Equal(got, want) {
		t.Fatalf("copy: found=%v err=%v equal=%v", found, err, bytes.Equal(got, want))
	}
	orig, err := testKube.CoreV1().Secrets(theirs).Get(ctx, f.Secret(), metav1.GetOptions{})
	if err != nil || orig.Labels[LabelAdoptedBy] != "res" {
		t.Errorf("original: %v, labels %v", err, orig.Labels)
	}
	if err := writeStateJSON(ctx, testKube, ours, "default", "res", nil, stateJSON(t, "lin-r", 1, nil)); err != nil {
		t.Fatal(err)
	}
	if err := adopt(ctx, testKube, ours, name, "default", "res", "res", nil); err != nil {
		t.Fatalf("adopting the copy: %v", err)
	}

	var adoptErr *AdoptError
	other := ForeignState{Namespace: theirs, Workspace: "default", Suffix: "other"}
	if err := writeStateJSON(ctx, testKube, theirs, "default", "other", nil, stateJSON(t, "lin-o", 1, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyForeign(ctx, testKube, other, ours, "two", "main"); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyForeign(ctx, testKube, f, ours, "two", "main"); !errors.As(err, &adoptErr) {
		t.Errorf("a second state for the same resource: %v", err)
	}
	if _, err := CopyForeign(ctx, testKube, ForeignState{Namespace: theirs, Workspace: "default", Suffix: "none"}, ours, "three", "main"); !errors.As(err, &adoptErr) {
		t.Errorf("a state that does not exist: %v", err)
	}
}
