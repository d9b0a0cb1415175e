package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
)

// Change is one resource change of a saved plan as rules see it: the fields of `terraform show
// -json`'s resource_changes[] and of its change (Before, After and AfterUnknown as decoded from
// that JSON: maps, lists, strings, float64 numbers, bools, nil).
type Change struct {
	Address, ModuleAddress, Mode, Type, Name, ProviderName string
	// Index is the instance key: nil, a float64 (count) or a string (for_each).
	Index                       any
	Actions                     []string
	Before, After, AfterUnknown any
	Importing                   bool
}

// Object is the claim, class or resource a rule sees.
type Object struct {
	Namespace, Name string
	Labels          map[string]string
}

// Plan is the saved plan a rule sees: its changes (no-ops and reads left out). Rules see only
// the plans of apply runs (a reclaim's destroy is not gated).
type Plan struct {
	Changes []Change
}

// Facts are what a rule knows besides the plan. Claim is zero for a resource with no claim.
// Namespace is the claim's namespace (Name, Labels; no Namespace), zero when no rule reads it
// (ReadsNamespace) or with no claim; omitted from Facts' JSON when zero, so that a policy digest of
// facts without it is what it was before the field existed.
type Facts struct {
	Claim, Class, Resource Object
	Namespace              Object `json:",omitzero"`
	// Cost is the resource's estimated monthly cost (rules' cost), set only when a rule reads it
	// (ReadsCost); omitted from the JSON when zero, as Namespace.
	Cost float64 `json:",omitzero"`
}

// Violation is a rule that one or more changes of a plan broke.
type Violation struct {
	Rule Rule
	// Addresses are the changes that broke it, in the plan's order.
	Addresses []string
	// Errors are the evaluations that failed (and so broke the rule), "address: error", at most
	// maxErrors.
	Errors []string
}

// maxErrors bounds Violation.Errors.
const maxErrors = 5

// Message is the violation for people: the rule's message, the addresses, and the first
// evaluation error if any, e.g. `rule no-public-buckets: buckets must not be public
// (google_storage_bucket.site)`.
func (v Violation) Message() string {
	msg := fmt.Sprintf("rule %s: %s (%s)", v.Rule.Name, v.Rule.Say(), strings.Join(v.Addresses, ", "))
	if len(v.Errors) > 0 {
		msg += "; could not evaluate " + v.Errors[0]
	}
	return msg
}

// Evaluate is EvaluateContext with a context that is never done.
func (s *Set) Evaluate(p Plan, facts Facts) []Violation {
	return s.EvaluateContext(context.Background(), p, facts)
}

// errPlanBudget is the evaluation error of a change left once a plan's evaluations have spent
// PerPlanCostLimit.
var errPlanBudget = fmt.Errorf("the plan's rules have spent their cost budget (%d units) on the changes before this one", PerPlanCostLimit)

// EvaluateContext evaluates every rule of s on every change of p, in order, and returns the rules
// broken (in the set's order; nil when the plan passes them all). An evaluation error (a missing
// key of change.after, a cost over PerChangeCostLimit, ctx done — CEL checks it every 100
// comprehension steps) breaks the rule for that change, and so does every evaluation left once
// the plan's evaluations together have cost PerPlanCostLimit: rules fail closed.
func (s *Set) EvaluateContext(ctx context.Context, p Plan, facts Facts) []Violation {
	if s == nil || len(s.rules) == 0 || len(p.Changes) == 0 {
		return nil
	}
	list := make([]any, len(p.Changes))
	for i, c := range p.Changes {
		list[i] = changeMap(c)
	}
	base := &activation{vars: map[string]any{
		"plan":            map[string]any{"changes": list},
		"claim":           objectMap(facts.Claim, true),
		"namespaceObject": objectMap(facts.Namespace, false),
		"class":           objectMap(facts.Class, false),
		"resource":        objectMap(facts.Resource, false),
		"cost":            facts.Cost,
	}}
	var out []Violation
	var spent uint64
	for _, r := range s.rules {
		var v *Violation
		for i, c := range p.Changes {
			ok, err := false, errPlanBudget
			if spent < PerPlanCostLimit {
				var cost uint64
				ok, cost, err = r.eval(ctx, &activation{change: list[i], parent: base})
				spent += cost
			}
			if ok {
				continue
			}
			if v == nil {
				v = &Violation{Rule: r.Rule}
			}
			v.Addresses = append(v.Addresses, c.Address)
			if err != nil && len(v.Errors) < maxErrors {
				v.Errors = append(v.Errors, c.Address+": "+err.Error())
			}
		}
		if v != nil {
			out = append(out, *v)
		}
	}
	return out
}

// activation resolves change (one per evaluation) over the plan's shared variables, so that an
// evaluation copies nothing.
type activation struct {
	change any
	vars   map[string]any
	parent *activation
}

func (a *activation) ResolveName(name string) (any, bool) {
	if a.parent != nil {
		if name == "change" {
			return a.change, true
		}
		return a.parent.ResolveName(name)
	}
	v, ok := a.vars[name]
	return v, ok
}

func (a *activation) Parent() interpreter.Activation { return nil }

// eval runs the rule on one activation: true when the change passes; false with the error when
// the evaluation failed.
// eval evaluates r on act and returns its verdict and its cost in CEL's units (PerChangeCostLimit
// when CEL reports none). Errors: CEL's (a cost over the limit, ctx done, a missing key), or a
// value that is not a bool.
func (r compiled) eval(ctx context.Context, act interpreter.Activation) (bool, uint64, error) {
	val, det, err := r.prg.ContextEval(ctx, act)
	cost := uint64(PerChangeCostLimit)
	if det != nil && det.ActualCost() != nil {
		cost = *det.ActualCost()
	}
	if err != nil {
		return false, cost, err
	}
	b, ok := val.(types.Bool)
	if !ok {
		return false, cost, errors.New("the expression did not evaluate to a bool")
	}
	return bool(b), cost, nil
}

func changeMap(c Change) map[string]any {
	actions := make([]any, len(c.Actions))
	for i, a := range c.Actions {
		actions[i] = a
	}
	return map[string]any{
		"address": c.Address, "moduleAddress": c.ModuleAddress, "mode": c.Mode, "type": c.Type, "name": c.Name,
		"index": c.Index, "providerName": c.ProviderName, "actions": actions,
		"before": c.Before, "after": c.After, "afterUnknown": c.AfterUnknown, "importing": c.Importing,
	}
}

func objectMap(o Object, namespaced bool) map[string]any {
	labels := map[string]any{}
	for k, v := range o.Labels {
		labels[k] = v
	}
	m := map[string]any{"name": o.Name, "labels": labels}
	if namespaced {
		m["namespace"] = o.Namespace
	}
	return m
}
