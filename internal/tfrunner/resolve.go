package tfrunner

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// Decisions a run makes about a create in doubt (Resolution.Decision), when its Gate resolves
// them (Gate.ResolveCreates).
const (
	// CreateAdopted: the object exists; it was imported into state, so the plan does not create it.
	CreateAdopted = "Adopted"
	// CreateRetried: the provider found no object with the address's import identity: the create
	// that a dead run had started never happened, and the plan makes it.
	CreateRetried = "Retried"
	// CreateHeld: the run cannot know; the plan waits for a person (v1alpha1.HoldInterruptedCreate).
	CreateHeld = "Held"
)

// Resolution is what a run decided about one create in doubt: the module address, the decision
// (CreateAdopted, CreateRetried or CreateHeld), the import ID tried ("" when none), and why.
type Resolution struct {
	Address, Decision, ID, Detail string
}

// importer imports the object id at a module address (Workspace.Import), reads an object's
// ownership mark (Workspace.OwnershipMark) and removes an object from state (Workspace.Forget).
type importer interface {
	Import(ctx context.Context, address, id string) error
	OwnershipMark(ctx context.Context, address string) (string, bool, error)
	Forget(ctx context.Context, address string) error
}

// resolveCreates decides each of gate's CreatesInDoubt and returns the decisions with the
// addresses still in doubt:
//
//   - an address in state (inState, module addresses) stays in doubt undecided: its object may be
//     the one a replace was creating when the run died, or the old one it was replacing; the gate
//     holds the plan only if the plan would create it again, as under Hold;
//   - an address with an identity (gate.Identities) is imported with that ID: when the import
//     succeeds the object existed and is now in state (CreateAdopted) — unless its ownership mark
//     names another resource than gate.Owner: it is then removed from state again and held (the
//     identity led to another resource's object); when the provider reports
//     that no such object exists (Terraform's "Cannot import non-existent remote object"), the
//     create never happened and may run (CreateRetried); any other failure decides nothing;
//   - an address without one stays in doubt (CreateHeld). Objects that live only in state are not
//     among them unless a provisioner of theirs had started, which touches the world.
//
// Errors: only a context error stops it; a failed import is a CreateHeld with its message.
//
// v1alpha1.CreatesUnrecorded stays in doubt as it is, and puts every address with an identity that
// is not in state among those decided: any of them may have been created unrecorded.
func resolveCreates(ctx context.Context, imp importer, gate *Gate, inState []string) ([]Resolution, []string, error) {
	var out []Resolution
	var held []string
	for _, addr := range inDoubtAddresses(gate, inState) {
		if addr == v1alpha1.CreatesUnrecorded {
			held = append(held, addr)
			continue
		}
		if slices.Contains(inState, addr) {
			held = append(held, addr)
			continue
		}
		r := Resolution{Address: addr, ID: gate.Identities[addr]}
		switch {
		case tfjson.NoRemoteObject(addr):
			r.Decision, r.Detail = CreateHeld, "a provisioner of it had started, and provisioners touch the world"
		case r.ID == "":
			r.Decision, r.Detail = CreateHeld, "no import identity is declared for it (importIdentities)"
		default:
			err := imp.Import(ctx, addr, r.ID)
			switch {
			case ctx.Err() != nil:
				return out, nil, ctx.Err()
			case err == nil:
				r.Decision, r.Detail = CreateAdopted, "the object exists and was imported into state"
				if other, err := checkOwner(ctx, imp, addr, gate.Owner); err != nil {
					r.Decision, r.Detail = CreateHeld, "checking its ownership mark failed: "+firstLine(err.Error())
				} else if other != "" {
					r.Decision, r.Detail = CreateHeld, other
				}
			case nonExistent(err):
				r.Decision, r.Detail = CreateRetried, "the provider found no object with this ID: the create never happened"
			default:
				r.Decision, r.Detail = CreateHeld, "importing it failed: "+firstLine(err.Error())
			}
		}
		if r.Decision == CreateHeld {
			held = append(held, addr)
		}
		out = append(out, r)
	}
	return out, held, nil
}

// inDoubtAddresses are gate's CreatesInDoubt, and, when they hold v1alpha1.CreatesUnrecorded, the
// addresses of gate's identities that are neither among them nor in state (inState), sorted.
func inDoubtAddresses(gate *Gate, inState []string) []string {
	out := slices.Clone(gate.CreatesInDoubt)
	if !slices.Contains(out, v1alpha1.CreatesUnrecorded) {
		return out
	}
	var more []string
	for addr := range gate.Identities {
		if !slices.Contains(out, addr) && !slices.Contains(inState, addr) {
			more = append(more, addr)
		}
	}
	slices.Sort(more)
	return append(out, more...)
}

// resolveGate resolves gate's creates in doubt in ws (resolveCreates) when gate asks for it, records
// the decisions in res.Resolutions, and returns the gate the plan is decided by: gate itself, or a
// copy whose CreatesInDoubt are only the addresses still in doubt.
func resolveGate(ctx context.Context, ws *Workspace, gate *Gate, res *ApplyResult) (*Gate, error) {
	if gate != nil && gate.StateOnly == nil && slices.Contains(gate.CreatesInDoubt, v1alpha1.CreatesUnrecorded) {
		// Which objects live only in state, from the modules init installed (unreadable: none).
		types, _ := readStateOnlyTypes(ws.dir)
		g := *gate
		g.StateOnly, gate = types.has, &g
	}
	if gate == nil || !gate.ResolveCreates || len(gate.CreatesInDoubt) == 0 {
		return gate, nil
	}
	inState, err := ws.StateAddresses(ctx)
	if err != nil {
		return gate, err
	}
	decided, held, err := resolveCreates(ctx, ws, gate, inState)
	res.Resolutions = decided
	if err != nil {
		return gate, err
	}
	g := *gate
	g.CreatesInDoubt = held
	for _, d := range decided {
		if d.Decision != CreateHeld {
			g.decided = append(g.decided, d.Address)
		}
	}
	return &g, nil
}

// nonExistent reports whether err is Terraform's refusal to import an object the provider did not
// find (terraform/internal/terraform: "Cannot import non-existent remote object"; OpenTofu alike).
func nonExistent(err error) bool {
	var re *RunError
	return errors.As(err, &re) && strings.Contains(re.Message, "Cannot import non-existent remote object")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
