package tfjson

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"

	hcjson "github.com/hashicorp/terraform-json"

	"github.com/conductor-tf/conductor-tf/internal/policy"
)

// Summary counts a plan's changes as Terraform's "Plan: N to add, N to change, N to destroy" line
// does (a replacement counts once in Add and once in Destroy), plus imports.
type Summary struct {
	Add, Change, Destroy, Import int
}

// Change is one resource change of a plan.
type Change struct {
	// Address of the resource (e.g. module.main.random_password.this).
	Address string
	// Actions as Terraform reports them: ["create"], ["update"], ["delete","create"], ["no-op"] …
	Actions []string
	// Importing is true when the plan imports the object.
	Importing bool

	// values are the change's before and after values (JSON, from show -json), hashed into the
	// plan's ID so that plans with the same actions but other values differ; not exposed.
	values []byte
	// rc is the change as show -json wrote it, what policy rules see (PolicyPlan); nil for a
	// plan read from a -json stream, which the gate never decides.
	rc *hcjson.ResourceChange
}

// Destroys reports whether the change deletes or replaces its object.
func (c Change) Destroys() bool { return slices.Contains(c.Actions, string(hcjson.ActionDelete)) }

// Plan is a saved plan: its file in the workspace and what it would do.
type Plan struct {
	// HasChanges is false when applying would change nothing.
	HasChanges bool
	Summary    Summary
	// Changes lists every resource change that is not a no-op, sorted by address.
	Changes []Change
	// ID identifies the plan's changes, with their values for a saved plan (show -json): equal
	// plans have equal IDs, and a plan that would set other values has another. IDs compare
	// between plans made the same way (saved plans, or -json streams). 12 hex characters.
	ID string
	// Destroy is true for a destroy plan.
	Destroy bool
}

// Summarize reads the resource changes of a plan rendered by show -json (terraform-json's Plan):
// its summary, its changes that are not plain no-ops, sorted by address, and its ID.
func Summarize(raw *hcjson.Plan) *Plan {
	p := &Plan{}
	for _, rc := range raw.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		a := rc.Change.Actions
		importing := rc.Change.Importing != nil
		if importing {
			p.Summary.Import++
		}
		switch {
		case a.Replace():
			p.Summary.Add++
			p.Summary.Destroy++
		case a.Create():
			p.Summary.Add++
		case a.Update():
			p.Summary.Change++
		case a.Delete():
			p.Summary.Destroy++
		case !importing:
			continue // no-op and read
		}
		actions := make([]string, len(a))
		for i, x := range a {
			actions[i] = string(x)
		}
		values, _ := json.Marshal([]any{rc.Change.Before, rc.Change.After, rc.Change.AfterUnknown})
		p.Changes = append(p.Changes, Change{Address: rc.Address, Actions: actions, Importing: importing, values: values, rc: rc})
	}
	p.sortAndHash()
	return p
}

// sortAndHash sorts the changes by address and sets ID from them, so that the same changes made
// by show -json of a saved plan or by a -json stream have the same ID.
func (p *Plan) sortAndHash() {
	sort.Slice(p.Changes, func(i, j int) bool { return p.Changes[i].Address < p.Changes[j].Address })
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(p.Changes)
	for _, c := range p.Changes {
		h.Write(c.values)
	}
	p.ID = hex.EncodeToString(h.Sum(nil))[:12]
}

// PolicyPlan is p as policy rules see it (policy.Change: show -json's resource_changes[]); a
// plan read from a -json stream gives only addresses, actions and importing.
func (p *Plan) PolicyPlan() policy.Plan {
	out := policy.Plan{Changes: make([]policy.Change, 0, len(p.Changes))}
	for _, c := range p.Changes {
		pc := policy.Change{Address: c.Address, Actions: c.Actions, Importing: c.Importing}
		if rc := c.rc; rc != nil {
			pc.ModuleAddress, pc.Mode, pc.Type, pc.Name, pc.ProviderName = rc.ModuleAddress, string(rc.Mode), rc.Type, rc.Name, rc.ProviderName
			pc.Index = jsonValue(rc.Index)
			pc.Before, pc.After, pc.AfterUnknown = jsonValue(rc.Change.Before), jsonValue(rc.Change.After), jsonValue(rc.Change.AfterUnknown)
		}
		out.Changes = append(out.Changes, pc)
	}
	return out
}

// jsonValue is v as encoding/json decodes JSON into an any (maps, lists, float64, string, bool,
// nil): terraform-json keeps values as decoded, except the index, an any of its own.
func jsonValue(v any) any {
	switch v.(type) {
	case nil, string, bool, float64, map[string]any, []any:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}
