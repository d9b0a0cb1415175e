package tfrunner

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/policy"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

var (
	noZ  = policy.Rule{Name: "no-z", Expression: "!change.address.endsWith('.z')", Action: policy.ActionDeny, Message: "z stays"}
	askY = policy.Rule{Name: "ask-y", Expression: "!change.address.endsWith('.y')", Action: policy.ActionRequireApproval}
)

func TestGateDecide(t *testing.T) {
	create := tfjson.Change{Address: "module.main.a.x", Actions: []string{"create"}}
	update := tfjson.Change{Address: "module.main.a.y", Actions: []string{"update"}}
	replace := tfjson.Change{Address: "module.main.a.z", Actions: []string{"delete", "create"}}
	plan := func(id string, cs ...tfjson.Change) *tfjson.Plan {
		return &tfjson.Plan{ID: id, HasChanges: len(cs) > 0, Changes: cs}
	}
	for _, tc := range []struct {
		name      string
		gate      Gate
		plan      *tfjson.Plan
		reason    string
		addresses []string
		discarded string
		rule      string
		render    bool
	}{
		{name: "an update passes", plan: plan("p1", create, update)},
		{name: "a replace is held by default", plan: plan("p1", update, replace),
			reason: v1alpha1.HoldDestructive, addresses: []string{"module.main.a.z"}, rule: policy.DestructiveChange.Name, render: true},
		{name: "allowed destructive changes pass", gate: Gate{AllowDestructive: true}, plan: plan("p1", replace)},
		{name: "an approved destructive plan passes", gate: Gate{Approved: "p1"}, plan: plan("p1", replace)},
		{name: "an approval of another plan is discarded", gate: Gate{Approved: "p0"}, plan: plan("p1", replace),
			reason: v1alpha1.HoldDestructive, addresses: []string{"module.main.a.z"}, discarded: "p0", rule: policy.DestructiveChange.Name, render: true},
		{name: "manual holds any change", gate: Gate{Manual: true, AllowDestructive: true}, plan: plan("p1", update),
			reason: v1alpha1.HoldManual, render: true},
		{name: "a plan already shown is not rendered again", gate: Gate{Manual: true, Shown: "p1", ShownReason: v1alpha1.HoldManual},
			plan: plan("p1", update), reason: v1alpha1.HoldManual},
		{name: "a replaced import is held before the guard", gate: Gate{AllowDestructive: true, Imported: []string{"module.main.a.z"}},
			plan: plan("p1", replace), reason: v1alpha1.HoldImportedReplaced, addresses: []string{"module.main.a.z"}, render: true},
		{name: "a create in doubt is held first", gate: Gate{Manual: true, CreatesInDoubt: []string{"module.main.a.x"}},
			plan: plan("p1", create, replace), reason: v1alpha1.HoldInterruptedCreate, addresses: []string{"module.main.a.x"}, render: true},
		{name: "a create in doubt the plan does not make again is not held", gate: Gate{CreatesInDoubt: []string{"module.main.b.q"}},
			plan: plan("p1", create)},
		{name: "an approval left from before does not pass a create in doubt", gate: Gate{Approved: "p1", CreatesInDoubt: []string{"module.main.a.x"}},
			plan: plan("p1", create), reason: v1alpha1.HoldInterruptedCreate, addresses: []string{"module.main.a.x"}, render: true},
		{name: "an approval of the plan shown as held for it passes a create in doubt",
			gate: Gate{Approved: "p1", CreatesInDoubt: []string{"module.main.a.x"}, Shown: "p1", ShownReason: v1alpha1.HoldInterruptedCreate},
			plan: plan("p1", create)},
		{name: "a Deny rule refuses the plan before anything else", gate: Gate{Manual: true, CreatesInDoubt: []string{"module.main.a.x"}, Policy: []policy.Rule{noZ}},
			plan: plan("p1", create, replace), reason: v1alpha1.HoldPolicyDenied, addresses: []string{"module.main.a.z"}, rule: "no-z", render: true},
		{name: "no approval passes a Deny rule", gate: Gate{Approved: "p1", Policy: []policy.Rule{noZ}},
			plan: plan("p1", replace), reason: v1alpha1.HoldPolicyDenied, addresses: []string{"module.main.a.z"}, rule: "no-z", render: true},
		{name: "a RequireApproval rule holds the plan before the guard", gate: Gate{Policy: []policy.Rule{askY}},
			plan: plan("p1", update, replace), reason: v1alpha1.HoldPolicyApproval, addresses: []string{"module.main.a.y"}, rule: "ask-y", render: true},
		{name: "an approval passes a RequireApproval rule", gate: Gate{Approved: "p1", Policy: []policy.Rule{askY}},
			plan: plan("p1", update)},
		{name: "the guard is a rule of its own", plan: plan("p1", replace),
			reason: v1alpha1.HoldDestructive, addresses: []string{"module.main.a.z"}, rule: policy.DestructiveChange.Name, render: true},
		{name: "rules a plan passes hold nothing", gate: Gate{Policy: []policy.Rule{noZ, askY}}, plan: plan("p1", create)},
		{name: "unrecorded creates hold every plain create of the plan", gate: Gate{CreatesInDoubt: []string{v1alpha1.CreatesUnrecorded}, AllowDestructive: true},
			plan: plan("p1", create, update, replace), reason: v1alpha1.HoldInterruptedCreate, addresses: []string{"module.main.a.x"}, render: true},
		{name: "unrecorded creates leave a replace (its object in state) to the guard", gate: Gate{CreatesInDoubt: []string{v1alpha1.CreatesUnrecorded}},
			plan: plan("p1", replace), reason: v1alpha1.HoldDestructive, addresses: []string{"module.main.a.z"}, rule: policy.DestructiveChange.Name, render: true},
		{name: "unrecorded creates leave out objects that live only in state",
			gate:   Gate{CreatesInDoubt: []string{v1alpha1.CreatesUnrecorded}, StateOnly: func(string) bool { return true }},
			plan:   plan("p1", tfjson.Change{Address: "module.main.random_pet.p", Actions: []string{"create"}}, create),
			reason: v1alpha1.HoldInterruptedCreate, addresses: []string{"module.main.a.x"}, render: true},
		{name: "an address the resolution decided is not in doubt under the mark",
			gate: Gate{CreatesInDoubt: []string{v1alpha1.CreatesUnrecorded}, decided: []string{"module.main.a.x"}}, plan: plan("p1", create)},
		{name: "a type named like a state-only one is in doubt unless its module confirms it",
			gate:   Gate{CreatesInDoubt: []string{v1alpha1.CreatesUnrecorded}},
			plan:   plan("p1", tfjson.Change{Address: "module.main.random_pet.p", Actions: []string{"create"}}),
			reason: v1alpha1.HoldInterruptedCreate, addresses: []string{"module.main.random_pet.p"}, render: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := tc.gate.Decide(context.Background(), tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			if tc.reason == "" {
				if h != nil {
					t.Fatalf("held: %+v", h)
				}
				return
			}
			if h == nil || h.Reason != tc.reason || !reflect.DeepEqual(h.Addresses, tc.addresses) || h.Discarded != tc.discarded || h.Plan != tc.plan || h.Rule != tc.rule {
				t.Fatalf("hold %+v, want %s %v (discarded %q)", h, tc.reason, tc.addresses, tc.discarded)
			}
			if got := tc.gate.NeedsRendering(h); got != tc.render {
				t.Fatalf("needs rendering %v, want %v", got, tc.render)
			}
		})
	}
}

// TestGateRefusesARuleItCannotCompile: a run never applies past a rule it could not read.
func TestGateRefusesARuleItCannotCompile(t *testing.T) {
	g := Gate{AllowDestructive: true, Policy: []policy.Rule{{Name: "broken", Expression: "change.type ==", Action: policy.ActionDeny}}}
	h, err := g.Decide(context.Background(), &tfjson.Plan{ID: "p1", HasChanges: true, Changes: []tfjson.Change{{Address: "a.b", Actions: []string{"create"}}}})
	if err == nil || h != nil || !strings.Contains(err.Error(), "rule 0 (broken)") {
		t.Fatalf("hold %+v, error %v; want the rule's compile error", h, err)
	}
}
