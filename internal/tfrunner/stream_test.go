package tfrunner_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// TestApplyJSONStream runs the one-process apply (apply -auto-approve -json) and the read-only drift
// check (plan -json -detailed-exitcode -lock=false) with each real binary, and checks what our
// stream types read from their real output: the planned changes, both change summaries and the
// non-sensitive outputs; then a change that replaces an object, then no change at all.
func TestApplyJSONStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, bin := range bins {
		t.Run(string(bin.Flavor), func(t *testing.T) {
			ws, spec, _ := workspace(t, ctx, bin, "pet", "stream")
			spec.Variables = map[string]any{"prefix": "one"}
			if _, err := ws.Prepare(spec); err != nil {
				t.Fatal(err)
			}
			if err := ws.Init(ctx); err != nil {
				t.Fatal(err)
			}

			var started []string
			res, err := ws.ApplyJSON(ctx, func(addr string) error { started = append(started, addr); return nil })
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(started)
			if want := []string{"module.main.random_password.this", "module.main.random_pet.this"}; !slices.Equal(started, want) {
				t.Errorf("creates started = %q, want %q (each apply_start of a create)", started, want)
			}
			p := res.Plan
			if !p.HasChanges || p.Summary != (tfrunner.Summary{Add: 2}) || len(p.Changes) != 2 {
				t.Fatalf("first apply's plan: %+v, want 2 to add", p)
			}
			if p.Changes[0].Address != "module.main.random_password.this" || strings.Join(p.Changes[0].Actions, ",") != "create" {
				t.Errorf("planned change 0 = %+v", p.Changes[0])
			}
			if res.Applied == nil || *res.Applied != (tfrunner.Summary{Add: 2}) {
				t.Errorf("apply summary = %+v, want 2 added", res.Applied)
			}
			var name string
			if err := json.Unmarshal(res.Outputs["name"].Value, &name); err != nil || !strings.HasPrefix(name, "one-") {
				t.Errorf("output name = %s (%v), want one-…", res.Outputs["name"].Value, err)
			}
			if pw := res.Outputs["password"]; !pw.Sensitive || len(pw.Value) != 0 {
				t.Errorf("sensitive output in the stream: %+v, want sensitive with no value", pw)
			}

			drift, err := ws.DriftCheck(ctx)
			if err != nil || drift.Plan.HasChanges || len(drift.Plan.Changes) != 0 {
				t.Fatalf("drift check right after apply: %+v, %v; want no changes", drift.Plan, err)
			}

			spec.Variables = map[string]any{"prefix": "two"}
			if _, err := ws.Prepare(spec); err != nil {
				t.Fatal(err)
			}
			drift, err = ws.DriftCheck(ctx)
			if err != nil || !drift.Plan.HasChanges || drift.Plan.Summary != (tfrunner.Summary{Add: 1, Destroy: 1}) {
				t.Fatalf("drift check of a new prefix: %+v, %v; want 1 replaced", drift.Plan, err)
			}
			if c := drift.Plan.Changes; len(c) != 1 || strings.Join(c[0].Actions, ",") != "delete,create" || !c[0].Destroys() {
				t.Errorf("replace change = %+v", c)
			}
			started = nil
			res, err = ws.ApplyJSON(ctx, func(addr string) error { started = append(started, addr); return nil })
			if !slices.Equal(started, []string{"module.main.random_pet.this"}) {
				t.Errorf("creates started by the replace = %q, want the new random_pet", started)
			}
			if err != nil || res.Plan.ID != drift.Plan.ID {
				t.Fatalf("apply of the replace: %v; plan id %s, drift check's %s (the same changes must have the same id)", err, res.Plan.ID, drift.Plan.ID)
			}
			if res.Applied == nil || *res.Applied != (tfrunner.Summary{Add: 1, Destroy: 1}) {
				t.Errorf("apply summary of the replace = %+v", res.Applied)
			}

			res, err = ws.ApplyJSON(ctx, nil)
			if err != nil || res.Plan.HasChanges || len(res.Plan.Changes) != 0 {
				t.Fatalf("apply with nothing to do: %+v, %v", res.Plan, err)
			}
			if _, ok := res.Outputs["name"]; !ok {
				t.Errorf("an apply with no changes still reports outputs: %+v", res.Outputs)
			}
		})
	}
}
