// Package policy is plan policy: rules a class sets on its resources' saved plans, written in CEL
// (github.com/google/cel-go, the language of Kubernetes' ValidatingAdmissionPolicy and CRD
// validation rules), checked inside the run between plan and apply, where the approval gate
// decides (tfrunner.Gate). A rule is an expression evaluated once for every resource change of the
// plan, as a ValidatingAdmissionPolicy's validation is for every request: true lets the change
// through, false (or an evaluation error: rules fail closed) breaks the rule for that change. A
// broken Deny rule refuses the plan outright; a broken RequireApproval rule holds it until a
// person approves that very plan.
//
// What a rule sees (variables; Fields names their keys):
//
//	change           the resource change: address, moduleAddress, mode, type, name, index,
//	                 providerName, actions (e.g. ["delete","create"]), before, after, afterUnknown
//	                 (the values of `terraform show -json`'s resource_changes[].change), importing
//	plan             the whole plan: changes (every change, as above)
//	claim            the bound claim: namespace, name, labels ("" and {} for a resource with no
//	                 claim)
//	namespaceObject  the bound claim's namespace: name, labels (what the cluster's administrators
//	                 set on it, where a claim's own labels are its tenant's to write; "" and {} with
//	                 no claim). Named as ValidatingAdmissionPolicy names it: namespace is reserved
//	                 in CEL.
//	class            the resource's class: name, labels
//	resource         the resource: name, labels
//	cost             the resource's estimated monthly cost, a double: its class's spec.price for
//	                 its capacity (0.0 when the class has no price), in the cluster's one currency
//
// A rule reads nothing else: no Secret, no state, no function that reaches outside the
// expression (the environment has CEL's standard library, its strings and sets extensions, and
// cross-type numeric comparisons). Each evaluation is bounded by PerChangeCostLimit.
package policy

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/ext"
)

// Action is what a broken rule does to the plan.
type Action string

const (
	// ActionDeny refuses the plan: it is not applied, and no approval lets it through.
	ActionDeny Action = "Deny"
	// ActionRequireApproval holds the plan until a person approves that very plan (by its ID).
	ActionRequireApproval Action = "RequireApproval"
)

// PerChangeCostLimit bounds one evaluation of one rule on one change, in CEL's cost units (about
// one per operation and per element a comprehension visits); the value is Kubernetes' per-call
// limit for validation rules (apiextensions' PerCallLimit). An evaluation that exceeds it is an
// evaluation error: the change breaks the rule.
const PerChangeCostLimit = 1_000_000

// PerPlanCostLimit bounds the evaluations of one plan together (every rule on every change), in
// CEL's cost units: 20 changes at PerChangeCostLimit each, so that a plan of thousands of changes
// cannot pin a runner for thousands of limits. Once spent, every evaluation left breaks its rule.
const PerPlanCostLimit = 20 * PerChangeCostLimit

// MaxExpressionLength bounds a rule's expression, in bytes (also the CRD's maxLength).
const MaxExpressionLength = 4096

// Rule is one rule in source form, as a class lists it (v1alpha1.PolicyRule), carried to the run.
type Rule struct {
	// Name identifies the rule in holds, conditions, events and metrics.
	Name string
	// Expression is CEL that evaluates to a bool for each change: true when the change passes.
	Expression string
	// Action is ActionDeny or ActionRequireApproval.
	Action Action
	// Message says what the rule asks for; "" shows "breaks rule <name>".
	Message string
}

// Say is the rule's message for people: Message, or a sentence naming the rule.
func (r Rule) Say() string {
	if r.Message != "" {
		return r.Message
	}
	return "breaks rule " + r.Name
}

// DestructiveChange is the destructive-change guard as a rule (every plan's last, unless the
// resource allows destructive changes): a change that deletes or replaces an existing object
// waits for approval.
var DestructiveChange = Rule{
	Name:       "destructive-change",
	Expression: "!('delete' in change.actions)",
	Action:     ActionRequireApproval,
	Message:    "it would delete or replace existing objects",
}

// Fields are the keys of each variable a rule sees; selecting any other key of these variables
// is a compile error (their values, change.before and change.after, are free).
var Fields = map[string][]string{
	"change":          {"address", "moduleAddress", "mode", "type", "name", "index", "providerName", "actions", "before", "after", "afterUnknown", "importing"},
	"plan":            {"changes"},
	"claim":           {"namespace", "name", "labels"},
	"namespaceObject": {"name", "labels"},
	"class":           {"name", "labels"},
	"resource":        {"name", "labels"},
}

// CompileError is a rule that does not compile: its index in the list, its name, and CEL's
// message (with line and column).
type CompileError struct {
	Index int
	Name  string
	Err   error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("rule %d (%s): %v", e.Index, e.Name, e.Err)
}

func (e *CompileError) Unwrap() error { return e.Err }

// Set is a list of compiled rules, in order. Safe for concurrent use.
type Set struct {
	rules []compiled
}

type compiled struct {
	Rule
	prg cel.Program
}

// Compile compiles rules in order. The error joins a *CompileError for each rule that does not
// compile: a syntax or type error, an expression that is not a bool, a key of a variable that
// does not exist (Fields), a missing name, an unknown action, or one longer than
// MaxExpressionLength. Compiled programs are cached by expression for the process's life.
func Compile(rules []Rule) (*Set, error) {
	s := &Set{}
	var errs []error
	for i, r := range rules {
		prg, err := program(r)
		if err != nil {
			errs = append(errs, &CompileError{Index: i, Name: r.Name, Err: err})
			continue
		}
		s.rules = append(s.rules, compiled{Rule: r, prg: prg})
	}
	return s, errors.Join(errs...)
}

// Len is the number of rules in the set.
func (s *Set) Len() int { return len(s.rules) }

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error

	cacheMu sync.Mutex
	cache   = map[string]cel.Program{}
)

// maxCached bounds the program cache; it is emptied when full (expressions come from classes,
// so this is reached only by a cluster with that many distinct rules).
const maxCached = 4096

func program(r Rule) (cel.Program, error) {
	switch {
	case r.Name == "":
		return nil, errors.New("a rule needs a name")
	case r.Action != ActionDeny && r.Action != ActionRequireApproval:
		return nil, fmt.Errorf("action %q is neither %s nor %s", r.Action, ActionDeny, ActionRequireApproval)
	case len(r.Expression) > MaxExpressionLength:
		return nil, fmt.Errorf("the expression is %d bytes, longer than %d", len(r.Expression), MaxExpressionLength)
	case strings.TrimSpace(r.Expression) == "":
		return nil, errors.New("the expression is empty")
	}
	cacheMu.Lock()
	prg, ok := cache[r.Expression]
	cacheMu.Unlock()
	if ok {
		return prg, nil
	}
	e, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := e.Compile(r.Expression)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, fmt.Errorf("the expression evaluates to %s, not bool", ast.OutputType())
	}
	if err := checkFields(ast); err != nil {
		return nil, err
	}
	prg, err = e.Program(ast, cel.CostLimit(PerChangeCostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	cacheMu.Lock()
	if len(cache) >= maxCached {
		clear(cache)
	}
	cache[r.Expression] = prg
	cacheMu.Unlock()
	return prg, nil
}

// celEnv is the one environment every rule compiles in (the variables of the package comment).
func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		obj := cel.MapType(cel.StringType, cel.DynType)
		env, envErr = cel.NewEnv(
			cel.Variable("change", obj),
			cel.Variable("plan", obj),
			cel.Variable("claim", obj),
			cel.Variable("namespaceObject", obj),
			cel.Variable("class", obj),
			cel.Variable("resource", obj),
			cel.Variable("cost", cel.DoubleType),
			cel.CrossTypeNumericComparisons(true),
			ext.Strings(),
			ext.Sets(),
		)
	})
	return env, envErr
}

// checkFields refuses a selection of a key the variables do not have (change.afer), which CEL
// cannot see in a map type and would otherwise fail every evaluation.
func checkFields(ast *cel.Ast) error {
	var errs []error
	celast.PostOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() != celast.SelectKind {
			return
		}
		sel := e.AsSelect()
		if sel.Operand().Kind() != celast.IdentKind {
			return
		}
		v := sel.Operand().AsIdent()
		keys, ok := Fields[v]
		if !ok {
			return
		}
		for _, k := range keys {
			if k == sel.FieldName() {
				return
			}
		}
		errs = append(errs, fmt.Errorf("%s has no key %q (it has %s)", v, sel.FieldName(), strings.Join(keys, ", ")))
	}))
	return errors.Join(errs...)
}

// ReadsNamespace reports whether any of rules names the namespaceObject variable (its identifier
// anywhere in the expression; a rule that does not parse counts as not reading it). The controller
// reads the claim's Namespace, and keeps its labels in a held plan's policy digest, only then: a
// class whose rules do not read it decides and digests exactly as before the variable existed.
func ReadsNamespace(rules []Rule) bool { return reads(rules, "namespaceObject") }

// ReadsCost reports whether any of rules names the cost variable, as ReadsNamespace: the
// controller puts the estimated monthly cost into the facts, and so into a held plan's policy
// digest (a price change makes the held plan again), only then.
func ReadsCost(rules []Rule) bool { return reads(rules, "cost") }

// reads reports whether any of rules names the variable ident.
func reads(rules []Rule, ident string) bool {
	e, err := celEnv()
	if err != nil {
		return false
	}
	for _, r := range rules {
		ast, iss := e.Parse(r.Expression)
		if iss.Err() != nil {
			continue
		}
		found := false
		celast.PostOrderVisit(ast.NativeRep().Expr(), celast.NewExprVisitor(func(x celast.Expr) {
			if x.Kind() == celast.IdentKind && x.AsIdent() == ident {
				found = true
			}
		}))
		if found {
			return true
		}
	}
	return false
}
