package tfrunner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/warm"
)

// ApplyOptions are what Apply does besides plan and apply, as data, and where its events go.
type ApplyOptions struct {
	// CheckInputs checks the spec's variables against the module's inputs after init, before
	// anything is planned (CheckInputs); a misfit stops the run with *InputError.
	CheckInputs bool
	// Imports are imported, before planning, when their address is not in state yet.
	Imports []ImportTarget
	// Gate, when set, makes the run stop between plan and apply: plan to a file, read it (show
	// -json), decide (Gate.Decide), then apply that very plan or return it in ApplyResult.Held.
	// Without it (the common path) the run is one process, apply -auto-approve -json. Runs with
	// Imports always use a saved plan (a nil Gate then holds nothing).
	Gate *Gate
	// Events receives the run's events (Queued, Started, CreateStarted, Applying); nil drops them.
	Events Events
}

// ImportTarget is an existing object to import: a resource address inside the module and its id.
type ImportTarget struct{ Address, ID string }

// ImportResult is the outcome of one import.
type ImportResult struct {
	Address, ID string
	// Imported is false when the address was already in state (nothing ran).
	Imported bool
	Err      error
}

// ApplyResult is what Apply did.
type ApplyResult struct {
	// Initialized is true when init ran.
	Initialized bool
	// Schema is the module's declared inputs and outputs.
	Schema *ModuleSchema
	// Imports lists each import's outcome.
	Imports []ImportResult
	// Plan is the plan made; Applied says whether it was applied (only plans with changes are).
	Plan    *tfjson.Plan
	Applied bool
	// Held is the saved plan the Gate stopped before apply (nil when none); Applied is then false.
	Held *Hold
	// Resolutions are the decisions about the Gate's creates in doubt (Gate.ResolveCreates).
	Resolutions []Resolution
	// Ended are the addresses whose apply ended with the provider's answer (apply_complete or
	// apply_errored), in order, also when the run failed: the creates among them are no longer in
	// doubt. A create cut off by an interrupt or a kill is not among them.
	Ended []string
	// Outputs are the root outputs after the run.
	Outputs map[string]tfjson.Output
	// Log is the run's output as people read it (the human-readable messages of the -json stream,
	// or the plan and apply output), sensitive values redacted by Terraform; at most MaxLogBytes.
	Log string
}

// MaxLogBytes bounds a run's log (ApplyResult.Log): 512 KiB, the end kept.
const MaxLogBytes = 512 << 10

// ErrStopped wraps the error an Events sink returned to stop a run.
var ErrStopped = errors.New("run stopped")

// Apply brings key's infrastructure to spec: init when needed, the input check, imports, plan,
// opts' Gate and apply when the plan has changes and passes, then outputs. The result is returned
// with what was done so far even when an error stops the run; a held plan is a result (Held), not
// an error. Errors are *InputError, *RunError or *LockError from Terraform, ErrStopped-wrapped
// errors from opts.Events, or context errors.
func (p *Pool) Apply(ctx context.Context, key string, spec Spec, opts ApplyOptions) (*ApplyResult, error) {
	res := &ApplyResult{}
	err := p.do(ctx, key, spec.Tenant, opts.Events.QueuedFunc(), func(ws *Workspace) error {
		if err := opts.Events.Send(Started{}); err != nil {
			return fmt.Errorf("%w: %w", ErrStopped, err)
		}
		var err error
		if res.Initialized, err = p.prepare(ctx, ws, spec); err != nil {
			return err
		}
		res.Schema = ws.Schema()
		if opts.CheckInputs {
			if err := CheckInputs(spec, res.Schema); err != nil {
				return err
			}
		}
		if err := importAll(ctx, ws, opts.Imports, res); err != nil {
			return err
		}
		if opts.Gate, err = resolveGate(ctx, ws, opts.Gate, res); err != nil {
			return err
		}
		if opts.Gate == nil && len(opts.Imports) == 0 {
			return p.applyJSON(ctx, ws, res, opts.Events.createStarts())
		}
		var log strings.Builder
		defer func() { res.Log = tailBytes(log.String(), MaxLogBytes) }()
		if res.Plan, err = ws.Plan(ctx, PlanOptions{Log: &log}); err != nil {
			return err
		}
		if res.Plan.HasChanges {
			if res.Held, err = decide(ctx, ws, opts.Gate, res.Plan); err != nil || res.Held != nil {
				return err
			}
			if err := opts.Events.Send(Applying{Plan: res.Plan}); err != nil {
				return fmt.Errorf("%w: %w", ErrStopped, err)
			}
			ended, err := ws.Apply(ctx, res.Plan, &log, opts.Events.createStarts())
			res.Ended = ended
			if err != nil {
				return err
			}
			res.Applied = true
		}
		res.Outputs, err = ws.Outputs(ctx)
		return err
	})
	p.tagErrored(key, spec.RunID)
	return res, err
}

// importAll imports each of imports whose address is not in state yet, recording each outcome in
// res; the first failed import stops.
func importAll(ctx context.Context, ws *Workspace, imports []ImportTarget, res *ApplyResult) error {
	if len(imports) == 0 {
		return nil
	}
	inState, err := ws.StateAddresses(ctx)
	if err != nil {
		return err
	}
	for _, imp := range imports {
		r := ImportResult{Address: ModuleAddress(imp.Address), ID: imp.ID}
		if !slices.Contains(inState, r.Address) {
			r.Imported = true
			r.Err = ws.Import(ctx, imp.Address, imp.ID)
		}
		res.Imports = append(res.Imports, r)
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// decide applies gate to saved plan p: the Hold, with Terraform's rendering of the plan when
// people have not seen it yet (one more command, show -no-color), or nil when p may be applied.
// A plan that cannot be rendered is held with a rendering that says why.
func decide(ctx context.Context, ws *Workspace, gate *Gate, p *tfjson.Plan) (*Hold, error) {
	if gate == nil {
		return nil, nil
	}
	h, err := gate.Decide(ctx, p)
	if err != nil || h == nil || !gate.NeedsRendering(h) {
		return h, err
	}
	text, err := ws.ShowPlanText(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		text = "the plan could not be rendered: " + err.Error()
	}
	h.Rendering = text
	return h, nil
}

// applyJSON is the common run: one apply -json gives the plan, the apply and the non-sensitive
// outputs; output -json runs only when the module has sensitive outputs, for their values.
func (p *Pool) applyJSON(ctx context.Context, ws *Workspace, res *ApplyResult, onCreate tfjson.CreateStartFunc) error {
	var extra []tfexec.ApplyOption
	release := func(bool) {}
	if wp := p.opts.WarmProviders; wp != nil && !ws.spec.ColdProviders {
		if provs := wp.Warmable(ws.Dir(), warm.Installed(ws.Dir())); len(provs) > 0 {
			// A provider that cannot be started warm is started by the run itself, as without.
			lock := filepath.Join(ws.Dir(), lockFile)
			if ws.shared != nil {
				lock = filepath.Join(ws.shared.dir, lockFile) // init's, which no run can write
			}
			if info, dirs, rel, err := wp.Checkout(ctx, provs, lock, ws.warmOwner(), ws.runEnv()); err == nil {
				extra, release = []tfexec.ApplyOption{tfexec.Reattach(info)}, rel
				ws.connect = dirs
				defer func() { ws.connect = nil }()
			}
		}
	}
	stream, err := ws.ApplyJSON(ctx, onCreate, extra...)
	release(err == nil && ctx.Err() == nil)
	if stream != nil {
		res.Log = tailBytes(strings.Join(stream.Log, "\n"), MaxLogBytes)
		res.Plan = stream.Plan
		res.Applied = stream.Applied != nil && stream.Plan.HasChanges
		res.Outputs = stream.Outputs
		res.Ended = stream.Ended
	}
	if err != nil {
		return err
	}
	for _, o := range res.Outputs {
		if o.Sensitive {
			res.Outputs, err = ws.Outputs(ctx)
			return err
		}
	}
	return nil
}

// DriftCheck plans key's infrastructure read-only (no lock, no saved plan, nothing written): what
// applying would change now, and which objects changed outside Terraform. It waits for a slot as
// runs do. Errors as for Workspace.DriftCheck.
func (p *Pool) DriftCheck(ctx context.Context, key string, spec Spec) (*tfjson.StreamResult, error) {
	var res *tfjson.StreamResult
	err := p.do(ctx, key, spec.Tenant, nil, func(ws *Workspace) error {
		if _, err := p.prepare(ctx, ws, spec); err != nil {
			return err
		}
		var err error
		res, err = ws.DriftCheck(ctx)
		return err
	})
	return res, err
}

// Destroy destroys everything in key's state (init first when needed), then forgets the workspace.
func (p *Pool) Destroy(ctx context.Context, key string, spec Spec) error {
	err := p.do(ctx, key, spec.Tenant, nil, func(ws *Workspace) error {
		if _, err := p.prepare(ctx, ws, spec); err != nil {
			return err
		}
		return ws.Destroy(ctx)
	})
	p.tagErrored(key, spec.RunID)
	if err == nil {
		p.Forget(key)
	}
	return err
}

// tailBytes keeps the last n bytes of s, marking the cut.
func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…(earlier output cut)\n" + s[len(s)-n:]
}
