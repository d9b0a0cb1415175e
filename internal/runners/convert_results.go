package runners

// Conversions of a run's results between package tfrunner's types and the run protocol's messages:
// the summary, plan, outputs, apply and drift results, gates and holds, errors and the run's identity.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/conductor-tf/conductor-tf/internal/policy"
	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

func summaryToProto(s tfjson.Summary) *runnerpb.Summary {
	return &runnerpb.Summary{Add: int64(s.Add), Change: int64(s.Change), Destroy: int64(s.Destroy), Import: int64(s.Import)}
}

func summaryFromProto(p *runnerpb.Summary) tfjson.Summary {
	return tfjson.Summary{Add: int(p.GetAdd()), Change: int(p.GetChange()), Destroy: int(p.GetDestroy()), Import: int(p.GetImport())}
}

func planToProto(pl *tfjson.Plan) *runnerpb.Plan {
	if pl == nil {
		return nil
	}
	p := &runnerpb.Plan{HasChanges: pl.HasChanges, Summary: summaryToProto(pl.Summary), Id: pl.ID, Destroy: pl.Destroy}
	for _, c := range pl.Changes {
		p.Changes = append(p.Changes, &runnerpb.Change{Address: c.Address, Actions: c.Actions, Importing: c.Importing})
	}
	return p
}

func planFromProto(p *runnerpb.Plan) *tfjson.Plan {
	if p == nil {
		return nil
	}
	pl := &tfjson.Plan{HasChanges: p.GetHasChanges(), Summary: summaryFromProto(p.GetSummary()), ID: p.GetId(), Destroy: p.GetDestroy()}
	for _, c := range p.GetChanges() {
		pl.Changes = append(pl.Changes, tfjson.Change{Address: c.GetAddress(), Actions: nilIfEmpty(c.GetActions()), Importing: c.GetImporting()})
	}
	return pl
}

func outputsToProto(in map[string]tfjson.Output) map[string]*runnerpb.Output {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]*runnerpb.Output, len(in))
	for k, o := range in {
		out[k] = &runnerpb.Output{Value: o.Value, Sensitive: o.Sensitive}
	}
	return out
}

func outputsFromProto(in map[string]*runnerpb.Output) map[string]tfjson.Output {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]tfjson.Output, len(in))
	for k, o := range in {
		out[k] = tfjson.Output{Value: json.RawMessage(nilIfEmpty(o.GetValue())), Sensitive: o.GetSensitive()}
	}
	return out
}

func applyResultToProto(r *tfrunner.ApplyResult) *runnerpb.ApplyResult {
	if r == nil {
		return nil
	}
	p := &runnerpb.ApplyResult{Initialized: r.Initialized, Schema: schemaToProto(r.Schema), Plan: planToProto(r.Plan),
		Applied: r.Applied, Outputs: outputsToProto(r.Outputs), Log: r.Log, Held: holdToProto(r.Held), Ended: r.Ended}
	for _, d := range r.Resolutions {
		p.Resolutions = append(p.Resolutions, &runnerpb.Resolution{Address: d.Address, Decision: d.Decision, Id: d.ID, Detail: d.Detail})
	}
	for _, imp := range r.Imports {
		p.Imports = append(p.Imports, &runnerpb.ImportResult{Address: imp.Address, Id: imp.ID, Imported: imp.Imported,
			Error: errorToProto(imp.Err)})
	}
	return p
}

// applyResultFromProto converts a received ApplyResult back; nil becomes an empty result. It fails
// only when the schema does not convert (see schemaFromProto), and then returns the rest.
func applyResultFromProto(p *runnerpb.ApplyResult) (*tfrunner.ApplyResult, error) {
	if p == nil {
		return &tfrunner.ApplyResult{}, nil
	}
	schema, err := schemaFromProto(p.GetSchema())
	r := &tfrunner.ApplyResult{Initialized: p.GetInitialized(), Schema: schema, Plan: planFromProto(p.GetPlan()),
		Applied: p.GetApplied(), Outputs: outputsFromProto(p.GetOutputs()), Log: p.GetLog(), Ended: p.GetEnded()}
	r.Held = holdFromProto(p.GetHeld(), r.Plan)
	for _, d := range p.GetResolutions() {
		r.Resolutions = append(r.Resolutions, tfrunner.Resolution{Address: d.GetAddress(), Decision: d.GetDecision(), ID: d.GetId(), Detail: d.GetDetail()})
	}
	for _, imp := range p.GetImports() {
		r.Imports = append(r.Imports, tfrunner.ImportResult{Address: imp.GetAddress(), ID: imp.GetId(), Imported: imp.GetImported(),
			Err: errorFromProto(imp.GetError(), nil)})
	}
	return r, err
}

// nilIfEmptyMap returns m, or nil when it is empty (as nilIfEmpty for slices).
func nilIfEmptyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

func gateToProto(g *tfrunner.Gate) *runnerpb.Gate {
	if g == nil {
		return nil
	}
	return &runnerpb.Gate{Approved: g.Approved, Manual: g.Manual, AllowDestructive: g.AllowDestructive,
		Imported: g.Imported, CreatesInDoubt: g.CreatesInDoubt, Shown: g.Shown, ShownReason: g.ShownReason,
		ResolveCreates: g.ResolveCreates, Identities: g.Identities, Owner: g.Owner,
		Policy: policyToProto(g.Policy), Facts: factsToProto(g.Facts)}
}

func gateFromProto(p *runnerpb.Gate) *tfrunner.Gate {
	if p == nil {
		return nil
	}
	return &tfrunner.Gate{Approved: p.GetApproved(), Manual: p.GetManual(), AllowDestructive: p.GetAllowDestructive(),
		Imported: nilIfEmpty(p.GetImported()), CreatesInDoubt: nilIfEmpty(p.GetCreatesInDoubt()), Shown: p.GetShown(), ShownReason: p.GetShownReason(),
		ResolveCreates: p.GetResolveCreates(), Identities: nilIfEmptyMap(p.GetIdentities()), Owner: p.GetOwner(),
		Policy: policyFromProto(p.GetPolicy()), Facts: factsFromProto(p.GetFacts())}
}

func policyToProto(rules []policy.Rule) []*runnerpb.PolicyRule {
	var out []*runnerpb.PolicyRule
	for _, r := range rules {
		out = append(out, &runnerpb.PolicyRule{Name: r.Name, Expression: r.Expression, Action: string(r.Action), Message: r.Message})
	}
	return out
}

func policyFromProto(rules []*runnerpb.PolicyRule) []policy.Rule {
	var out []policy.Rule
	for _, r := range rules {
		out = append(out, policy.Rule{Name: r.GetName(), Expression: r.GetExpression(), Action: policy.Action(r.GetAction()), Message: r.GetMessage()})
	}
	return out
}

func factsToProto(f policy.Facts) *runnerpb.PolicyFacts {
	obj := func(o policy.Object) *runnerpb.PolicyObject {
		return &runnerpb.PolicyObject{Namespace: o.Namespace, Name: o.Name, Labels: o.Labels}
	}
	return &runnerpb.PolicyFacts{Claim: obj(f.Claim), Class: obj(f.Class), Resource: obj(f.Resource), Namespace: obj(f.Namespace), Cost: f.Cost}
}

func factsFromProto(p *runnerpb.PolicyFacts) policy.Facts {
	obj := func(o *runnerpb.PolicyObject) policy.Object {
		return policy.Object{Namespace: o.GetNamespace(), Name: o.GetName(), Labels: nilIfEmptyMap(o.GetLabels())}
	}
	return policy.Facts{Claim: obj(p.GetClaim()), Class: obj(p.GetClass()), Resource: obj(p.GetResource()), Namespace: obj(p.GetNamespace()), Cost: p.GetCost()}
}

// holdToProto converts h without its plan, which travels once, as ApplyResult.plan.
func holdToProto(h *tfrunner.Hold) *runnerpb.Hold {
	if h == nil {
		return nil
	}
	return &runnerpb.Hold{Reason: h.Reason, Addresses: h.Addresses, Rendering: h.Rendering, Discarded: h.Discarded, Rule: h.Rule, Message: h.Message}
}

// holdFromProto converts a received Hold of plan (the ApplyResult's plan); nil stays nil.
func holdFromProto(p *runnerpb.Hold, plan *tfjson.Plan) *tfrunner.Hold {
	if p == nil {
		return nil
	}
	return &tfrunner.Hold{Plan: plan, Reason: p.GetReason(), Addresses: nilIfEmpty(p.GetAddresses()), Rendering: p.GetRendering(),
		Discarded: p.GetDiscarded(), Rule: p.GetRule(), Message: p.GetMessage()}
}

func streamResultToProto(r *tfjson.StreamResult) *runnerpb.StreamResult {
	if r == nil {
		return nil
	}
	p := &runnerpb.StreamResult{Plan: planToProto(r.Plan), Outputs: outputsToProto(r.Outputs), Drift: r.Drift, Errors: r.Errors, Log: r.Log, OutputsChanged: r.OutputsChanged}
	if r.Applied != nil {
		p.Applied = summaryToProto(*r.Applied)
	}
	return p
}

func streamResultFromProto(p *runnerpb.StreamResult) *tfjson.StreamResult {
	if p == nil {
		return nil
	}
	r := &tfjson.StreamResult{Plan: planFromProto(p.GetPlan()), Outputs: outputsFromProto(p.GetOutputs()),
		Drift: nilIfEmpty(p.GetDrift()), Errors: nilIfEmpty(p.GetErrors()), Log: nilIfEmpty(p.GetLog()), OutputsChanged: p.GetOutputsChanged()}
	if p.GetApplied() != nil {
		s := summaryFromProto(p.GetApplied())
		r.Applied = &s
	}
	return r
}

// newResult is the Result of a run that returned apply, drift and err.
func newResult(apply *tfrunner.ApplyResult, drift *tfjson.StreamResult, err error) *runnerpb.Result {
	return &runnerpb.Result{Apply: applyResultToProto(apply), Drift: streamResultToProto(drift), Error: errorToProto(err)}
}

// errorToProto classifies err for the stream; nil stays nil.
func errorToProto(err error) *runnerpb.Error {
	if err == nil {
		return nil
	}
	p := &runnerpb.Error{Kind: runnerpb.ErrorKind_ERROR_KIND_UNSPECIFIED, Message: err.Error(), Killed: tfrunner.Killed(err)}
	var re *tfrunner.RunError
	var le *tfrunner.LockError
	var ie *tfrunner.InputError
	switch {
	case errors.As(err, &ie):
		p.Kind, p.Message = runnerpb.ErrorKind_ERROR_KIND_INPUT, ie.Problems
	case errors.As(err, &le):
		p.Kind = runnerpb.ErrorKind_ERROR_KIND_LOCK
		p.Detail = &runnerpb.Error_Lock{Lock: &runnerpb.LockError{Id: le.ID, Who: le.Who, Operation: le.Operation, Created: le.Created, Op: le.Op}}
	case errors.Is(err, tfrunner.ErrStopped):
		p.Kind = runnerpb.ErrorKind_ERROR_KIND_STOPPED
	case errors.As(err, &re):
		p.Kind = runnerpb.ErrorKind_ERROR_KIND_RUN
		p.Detail = &runnerpb.Error_Run{Run: &runnerpb.RunError{Op: re.Op, Message: re.Message}}
	case errors.Is(err, context.Canceled):
		p.Kind = runnerpb.ErrorKind_ERROR_KIND_CANCELLED
	}
	return p
}

// errorFromProto returns the error the stream carried, so that errors.As and errors.Is find what
// they would in the runner's error: *tfrunner.RunError (wrapping tfrunner.ErrProcessLost when
// killed), *tfrunner.LockError, *tfrunner.InputError, tfrunner.ErrStopped, context.Canceled. hookErr
// is the manager's own answer to an event for ERROR_KIND_STOPPED (the original, with its type); nil
// stays nil.
func errorFromProto(p *runnerpb.Error, hookErr error) error {
	if p == nil {
		return nil
	}
	msg := p.GetMessage()
	cause := errors.New(msg)
	if p.GetKilled() {
		cause = fmt.Errorf("%s: %w", msg, tfrunner.ErrProcessLost)
	}
	switch p.GetKind() {
	case runnerpb.ErrorKind_ERROR_KIND_RUN:
		if re := p.GetRun(); re != nil {
			return &tfrunner.RunError{Op: re.GetOp(), Message: re.GetMessage(), Err: cause}
		}
	case runnerpb.ErrorKind_ERROR_KIND_LOCK:
		if le := p.GetLock(); le != nil {
			return &tfrunner.LockError{ID: le.GetId(), Who: le.GetWho(), Operation: le.GetOperation(), Created: le.GetCreated(), Op: le.GetOp()}
		}
	case runnerpb.ErrorKind_ERROR_KIND_INPUT:
		return &tfrunner.InputError{Problems: msg}
	case runnerpb.ErrorKind_ERROR_KIND_STOPPED:
		if hookErr != nil {
			return fmt.Errorf("%w: %w", tfrunner.ErrStopped, hookErr)
		}
		return fmt.Errorf("%w: %s", tfrunner.ErrStopped, msg)
	case runnerpb.ErrorKind_ERROR_KIND_CANCELLED:
		if p.GetKilled() {
			return fmt.Errorf("%w: %w", cause, context.Canceled)
		}
		return fmt.Errorf("%s: %w", msg, context.Canceled)
	}
	return cause
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return maps.Clone(m)
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

// identityToProto converts a granted cloud identity for the stream; nil stays nil.
func identityToProto(id *tfrunner.Identity) *runnerpb.Identity {
	if id == nil {
		return nil
	}
	p := &runnerpb.Identity{Token: id.Token, Env: cloneMap(id.Env), TokenFileEnv: slices.Clone(id.TokenFileEnv)}
	if g := id.Google; g != nil {
		p.Google = &runnerpb.GoogleIdentity{Audience: g.Audience, ServiceAccountEmail: g.ServiceAccountEmail}
	}
	return p
}

// identityFromProto converts a received identity back; unset is nil.
func identityFromProto(p *runnerpb.Identity) *tfrunner.Identity {
	if p == nil {
		return nil
	}
	id := &tfrunner.Identity{Token: p.GetToken(), Env: cloneMap(p.GetEnv()), TokenFileEnv: slices.Clone(p.GetTokenFileEnv())}
	if g := p.GetGoogle(); g != nil {
		id.Google = &tfrunner.GoogleIdentity{Audience: g.GetAudience(), ServiceAccountEmail: g.GetServiceAccountEmail()}
	}
	return id
}
