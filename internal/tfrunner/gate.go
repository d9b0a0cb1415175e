package tfrunner

import "slices"

// Reasons a saved plan is held by its Gate (Hold.Reason), the values of the resource's
// status.pendingPlan.reason.
const (
	// HoldInterruptedCreate: the plan would create again an object whose create a dead run had
	// started (crossplane-runtime's create-pending, for Terraform).
	HoldInterruptedCreate = "InterruptedCreate"
	// HoldImportedReplaced: the plan would destroy or replace an imported object.
	HoldImportedReplaced = "ImportedObjectReplaced"
	// HoldManual: the resource's approval is Manual and the plan has changes.
	HoldManual = "Manual"
	// HoldDestructive: the plan would delete or replace an existing object.
	HoldDestructive = "DestructiveChange"
)

// Gate is the decision between a saved plan and its apply, as data the run applies itself: the
// run never calls back into the controller to ask. A plan is held (first match) when it would
// create again one of CreatesInDoubt, destroy or replace one of Imported, when Manual, or when it
// would delete or replace anything and AllowDestructive is false; unless Approved names it.
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
	// CreatesInDoubt are the module addresses of objects a dead run had started creating.
	CreatesInDoubt []string
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
}

// Hold is a saved plan its Gate stopped before apply.
type Hold struct {
	Plan *Plan
	// Reason is one of the Hold* constants; Addresses are the objects concerned (none for Manual).
	Reason    string
	Addresses []string
	// Rendering is Terraform's human-readable plan (show -no-color, sensitive values redacted by
	// Terraform); "" when the plan was already shown (Gate.Shown).
	Rendering string
	// Discarded is the approved plan ID that did not match this plan ("" when none).
	Discarded string
}

// Decide returns the Hold of plan p, nil when p may be applied. Rendering is left empty: the run
// fills it in only for a plan people have not seen yet (NeedsRendering).
func (g Gate) Decide(p *Plan) *Hold {
	reason, addresses := g.reason(p)
	if reason == "" {
		return nil
	}
	approved := g.Approved == p.ID
	if reason == HoldInterruptedCreate {
		approved = approved && g.Shown == p.ID && g.ShownReason == HoldInterruptedCreate
	}
	if approved {
		return nil
	}
	h := &Hold{Plan: p, Reason: reason, Addresses: addresses}
	if g.Approved != "" && g.Approved != p.ID {
		h.Discarded = g.Approved
	}
	return h
}

// NeedsRendering reports whether h's plan is new to people (not Gate.Shown with the same reason).
func (g Gate) NeedsRendering(h *Hold) bool {
	return g.Shown != h.Plan.ID || g.ShownReason != h.Reason
}

// reason says why p must wait, with the addresses concerned ("" when it need not).
func (g Gate) reason(p *Plan) (string, []string) {
	var again, importedRisky, destructive []string
	for _, c := range p.Changes {
		if slices.Contains(c.Actions, "create") && slices.Contains(g.CreatesInDoubt, c.Address) {
			again = append(again, c.Address)
		}
		if c.Destroys() {
			destructive = append(destructive, c.Address)
			if slices.Contains(g.Imported, c.Address) {
				importedRisky = append(importedRisky, c.Address)
			}
		}
	}
	switch {
	case len(again) > 0:
		return HoldInterruptedCreate, again
	case len(importedRisky) > 0:
		return HoldImportedReplaced, importedRisky
	case g.Manual && p.HasChanges:
		return HoldManual, nil
	case len(destructive) > 0 && !g.AllowDestructive:
		return HoldDestructive, destructive
	}
	return "", nil
}
