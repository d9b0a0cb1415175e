package tfrunner

import (
	"context"
	"fmt"
	"slices"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/policy"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// Gate is the decision between a saved plan and its apply, as data the run applies itself: the
// run never calls back into the controller to ask. A plan is refused when it breaks a Deny rule of
// Policy (whatever Approved says); otherwise held (first match) when it would create again one of
// CreatesInDoubt, destroy or replace one of Imported, when Manual, when it breaks a
// RequireApproval rule of Policy, or when it would delete or replace anything and
// AllowDestructive is false (policy.DestructiveChange, the last rule); unless Approved names it.
//
// An approval of a plan held for InterruptedCreate counts only when that very plan was shown as
// held for that reason (Shown, ShownReason): an approval left from before (its apply killed, the
// same plan made again) must not pass.
type Gate struct {
	// Approved is the plan ID a person approved ("" when none).
	Approved string
	// Manual holds every plan with changes.
	Manual bool
	// AllowDestructive lets deletes and replaces of existing objects through.
	AllowDestructive bool
	// Imported are the module addresses (ModuleAddress) of imported objects.
	Imported []string
	// CreatesInDoubt are the module addresses of objects a dead run had started creating, and
	// v1alpha1.CreatesUnrecorded when it may have started creates it did not record (InDoubt).
	CreatesInDoubt []string
	// StateOnly reports the addresses of objects that live only in state (readStateOnlyTypes),
	// which CreatesUnrecorded leaves out; nil: none is known to (every create is in doubt).
	StateOnly func(address string) bool
	// decided are the addresses the run's resolution adopted or created again (resolveGate): no
	// longer in doubt under CreatesUnrecorded.
	decided []string
	// ResolveCreates makes the run decide CreatesInDoubt before planning (resolveCreates): adopt
	// the objects that exist, create those the provider finds none of, hold the rest.
	ResolveCreates bool
	// Identities are import IDs by module address (ModuleAddress), for ResolveCreates.
	Identities map[string]string
	// Owner is the resource's name. An object ResolveCreates adopts whose ownership mark
	// (OwnershipMark) names another resource is given back — removed from state again — and held:
	// the identity led to another resource's object. "": no check.
	Owner string
	// Shown and ShownReason are the plan already shown to people as held, and why; a plan held
	// again with the same ID is not rendered again.
	Shown, ShownReason string
	// Policy are the class's plan rules, in order (source form: compiled in the run, cached by
	// expression); Facts what they see besides the plan.
	Policy []policy.Rule
	Facts  policy.Facts
}

// Hold is a saved plan its Gate stopped before apply.
type Hold struct {
	Plan *tfjson.Plan
	// Reason is one of the Hold* constants; Addresses are the objects concerned (none for Manual).
	Reason    string
	Addresses []string
	// Rule is the policy rule that stopped the plan (policy.DestructiveChange's name for
	// v1alpha1.HoldDestructive) and Message its message with the addresses; "" for the other reasons.
	Rule, Message string
	// Rendering is Terraform's human-readable plan (show -no-color, sensitive values redacted by
	// Terraform); "" when the plan was already shown (Gate.Shown).
	Rendering string
	// Discarded is the approved plan ID that did not match this plan ("" when none).
	Discarded string
}

// Decide returns the Hold of plan p, nil when p may be applied; ctx bounds the rules' evaluation
// (policy.Set.EvaluateContext). Rendering is left empty: the run
// fills it in only for a plan people have not seen yet (NeedsRendering). The error is a rule of
// Policy that does not compile (the controller checks them before the run; this is the run's own
// check, so that no plan is applied past a rule it could not read).
func (g Gate) Decide(ctx context.Context, p *tfjson.Plan) (*Hold, error) {
	h, err := g.hold(ctx, p)
	if h == nil || err != nil {
		return nil, err
	}
	approved := g.Approved == p.ID
	switch h.Reason {
	case v1alpha1.HoldInterruptedCreate:
		approved = approved && g.Shown == p.ID && g.ShownReason == v1alpha1.HoldInterruptedCreate
	case v1alpha1.HoldPolicyDenied:
		approved = false
	}
	if approved {
		return nil, nil
	}
	if g.Approved != "" && g.Approved != p.ID {
		h.Discarded = g.Approved
	}
	return h, nil
}

// NeedsRendering reports whether h's plan is new to people (not Gate.Shown with the same reason).
func (g Gate) NeedsRendering(h *Hold) bool {
	return g.Shown != h.Plan.ID || g.ShownReason != h.Reason
}

// hold says why p must wait (Plan, Reason, Addresses, and Rule and Message for a rule), nil
// when it need not.
func (g Gate) hold(ctx context.Context, p *tfjson.Plan) (*Hold, error) {
	rules := slices.Clone(g.Policy)
	if !g.AllowDestructive {
		rules = append(rules, policy.DestructiveChange)
	}
	set, err := policy.Compile(rules)
	if err != nil {
		return nil, fmt.Errorf("the plan policy: %w", err)
	}
	violations := set.EvaluateContext(ctx, p.PolicyPlan(), g.Facts)
	ruled := func(reason string, v policy.Violation) *Hold {
		return &Hold{Plan: p, Reason: reason, Addresses: v.Addresses, Rule: v.Rule.Name, Message: v.Message()}
	}
	for _, v := range violations {
		if v.Rule.Action == policy.ActionDeny {
			return ruled(v1alpha1.HoldPolicyDenied, v), nil
		}
	}
	var again, importedRisky []string
	for _, c := range p.Changes {
		if g.createsAgain(c) {
			again = append(again, c.Address)
		}
		if c.Destroys() && slices.Contains(g.Imported, c.Address) {
			importedRisky = append(importedRisky, c.Address)
		}
	}
	switch {
	case len(again) > 0:
		return &Hold{Plan: p, Reason: v1alpha1.HoldInterruptedCreate, Addresses: again}, nil
	case len(importedRisky) > 0:
		return &Hold{Plan: p, Reason: v1alpha1.HoldImportedReplaced, Addresses: importedRisky}, nil
	case g.Manual && p.HasChanges:
		return &Hold{Plan: p, Reason: v1alpha1.HoldManual}, nil
	}
	for _, v := range violations {
		// The guard is the set's last rule when it is in it: a class's own rule of that name
		// is refused by the class check, so the name alone tells them apart here.
		if !g.AllowDestructive && v.Rule.Name == policy.DestructiveChange.Name {
			h := ruled(v1alpha1.HoldDestructive, v)
			h.Message = ""
			return h, nil
		}
		return ruled(v1alpha1.HoldPolicyApproval, v), nil
	}
	return nil, nil
}

// InDoubt reports whether a create of the object at module address is in doubt: the address is
// among CreatesInDoubt, or CreatesInDoubt has v1alpha1.CreatesUnrecorded and the object is not one
// that lives only in state (tfjson.NoRemoteObject, confirmed by StateOnly: creating those again
// duplicates nothing; their provisioners' starts are recorded when they happen) nor one the run's
// resolution decided (adopted, or found missing and created again).
func (g Gate) InDoubt(address string) bool {
	if slices.Contains(g.CreatesInDoubt, address) {
		return true
	}
	if !slices.Contains(g.CreatesInDoubt, v1alpha1.CreatesUnrecorded) || slices.Contains(g.decided, address) {
		return false
	}
	return !(tfjson.NoRemoteObject(address) && g.StateOnly != nil && g.StateOnly(address))
}

// createsAgain reports whether change c would create again an object in doubt: any create of an
// address CreatesInDoubt names, and, under v1alpha1.CreatesUnrecorded, a plain create (a replace's
// object is in state: the destructive-change guard sees it) of an object InDoubt.
func (g Gate) createsAgain(c tfjson.Change) bool {
	if !slices.Contains(c.Actions, "create") {
		return false
	}
	return slices.Contains(g.CreatesInDoubt, c.Address) || !slices.Contains(c.Actions, "delete") && g.InDoubt(c.Address)
}
