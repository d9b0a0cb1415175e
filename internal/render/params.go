package render

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// ParameterUse is how a class's template reads one claim parameter (claim.spec.parameters.NAME).
type ParameterUse struct {
	// Name is the parameter's key.
	Name string
	// Required: rendering fails without it (read directly, not through lookup or under a
	// condition).
	Required bool
	// Variable is the module variable whose value is exactly this parameter
	// ("${claim.spec.parameters.NAME}", or lookup of it, alone): the parameter must convert to that
	// variable's type. "" when the parameter is one part of a value.
	Variable string
	// Interpolated: the parameter is a part of a string ("a-${claim.spec.parameters.NAME}"), so it
	// must be a string, number or bool.
	Interpolated bool
}

// NotExpressible is a template whose reading of claim parameters ParameterUses cannot describe
// (the parameters map passed whole, indexed by a computed key, or iterated): claims of the class
// are then checked only when they render.
type NotExpressible struct {
	Variable, Why string
}

func (e *NotExpressible) Error() string {
	return fmt.Sprintf("variable %q: %s", e.Variable, e.Why)
}

// ParameterUses describes how the template reads claim parameters, one ParameterUse per
// parameter name (sorted; a name read several ways is merged: required if any read is, every
// variable it is alone in), or a *NotExpressible. Rules follow hcl's evaluation: a traversal in a
// conditional's branch or a for expression may not be evaluated (not required); lookup(
// claim.spec.parameters, "NAME", default) is optional.
func (t *Template) ParameterUses() ([]ParameterUse, error) {
	uses := map[string]*ParameterUse{}
	for _, name := range slices.Sorted(maps.Keys(t.exprs)) {
		w := &paramWalker{variable: name, uses: uses}
		if expr, ok := t.exprs[name].(hclsyntax.Expression); ok {
			if n, ok := alone(expr); ok {
				w.whole = n
			}
			hclsyntax.Walk(expr, w)
		}
		if w.err != nil {
			return nil, w.err
		}
	}
	out := make([]ParameterUse, 0, len(uses))
	for _, n := range slices.Sorted(maps.Keys(uses)) {
		out = append(out, *uses[n])
	}
	return out, nil
}

// alone is the parameter a whole variable's value is, directly or through lookup.
func alone(expr hclsyntax.Expression) (string, bool) {
	if w, ok := expr.(*hclsyntax.TemplateWrapExpr); ok {
		expr = w.Wrapped
	}
	if n, ok := paramOf(expr); ok {
		return n, true
	}
	return lookupOf(expr)
}

// paramOf is NAME of claim.spec.parameters.NAME (or ["NAME"]), with nothing after it.
func paramOf(expr hclsyntax.Expression) (string, bool) {
	st, ok := expr.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(st.Traversal) != 4 || !isParameters(st.Traversal[:3]) {
		return "", false
	}
	return stepName(st.Traversal[3])
}

// lookupOf is NAME of lookup(claim.spec.parameters, "NAME", default).
func lookupOf(expr hclsyntax.Expression) (string, bool) {
	call, ok := expr.(*hclsyntax.FunctionCallExpr)
	if !ok || call.Name != "lookup" || len(call.Args) != 3 {
		return "", false
	}
	st, ok := call.Args[0].(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(st.Traversal) != 3 || !isParameters(st.Traversal) {
		return "", false
	}
	key := call.Args[1]
	if tmpl, ok := key.(*hclsyntax.TemplateExpr); ok && len(tmpl.Parts) == 1 {
		key = tmpl.Parts[0]
	}
	return literal(key)
}

func isParameters(tr hcl.Traversal) bool {
	if len(tr) < 3 || tr.RootName() != "claim" {
		return false
	}
	a, ok1 := stepName(tr[1])
	b, ok2 := stepName(tr[2])
	return ok1 && ok2 && a == "spec" && b == "parameters"
}

func stepName(s hcl.Traverser) (string, bool) {
	switch s := s.(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
			return s.Key.AsString(), true
		}
	}
	return "", false
}

// paramWalker walks one variable's expression, keeping the nodes above (stack).
type paramWalker struct {
	variable string
	whole    string // the parameter the whole value is, if it is one
	uses     map[string]*ParameterUse
	stack    []hclsyntax.Node
	err      error
}

func (w *paramWalker) Enter(n hclsyntax.Node) hcl.Diagnostics {
	defer func() { w.stack = append(w.stack, n) }()
	if w.err != nil {
		return nil
	}
	if call, ok := n.(*hclsyntax.FunctionCallExpr); ok {
		if name, ok := lookupOf(call); ok {
			w.note(name, false, false)
		}
		return nil
	}
	st, ok := n.(*hclsyntax.ScopeTraversalExpr)
	if !ok || !isParameters(st.Traversal) {
		return nil
	}
	if len(st.Traversal) == 3 {
		// claim.spec.parameters itself: fine only as lookup's first argument.
		if parent := w.parent(); parent != nil {
			if call, ok := parent.(*hclsyntax.FunctionCallExpr); ok {
				if _, ok := lookupOf(call); ok && call.Args[0] == n {
					return nil
				}
			}
		}
		w.err = &NotExpressible{Variable: w.variable, Why: "it reads claim.spec.parameters as a whole (only claim.spec.parameters.NAME and lookup(claim.spec.parameters, \"NAME\", default) are checked at admission)"}
		return nil
	}
	name, ok := stepName(st.Traversal[3])
	if !ok {
		w.err = &NotExpressible{Variable: w.variable, Why: "it indexes claim.spec.parameters with a key that is not a string"}
		return nil
	}
	required := !w.conditional()
	interpolated := false
	if parent := w.parent(); parent != nil {
		if tmpl, ok := parent.(*hclsyntax.TemplateExpr); ok && !(len(tmpl.Parts) == 1) {
			interpolated = len(st.Traversal) == 4
		}
	}
	w.note(name, required, interpolated)
	return nil
}

func (w *paramWalker) Exit(hclsyntax.Node) hcl.Diagnostics {
	w.stack = w.stack[:len(w.stack)-1]
	return nil
}

func (w *paramWalker) parent() hclsyntax.Node {
	if len(w.stack) == 0 {
		return nil
	}
	return w.stack[len(w.stack)-1]
}

// conditional reports whether the node being entered may go unevaluated (or its error be
// dropped): under a conditional, a for or splat expression, or an operand of && or || (hcl's
// ShortCircuit drops the other side's errors once one side decides).
func (w *paramWalker) conditional() bool {
	for _, n := range w.stack {
		switch n := n.(type) {
		case *hclsyntax.ConditionalExpr, *hclsyntax.ForExpr, *hclsyntax.SplatExpr:
			return true
		case *hclsyntax.BinaryOpExpr:
			if n.Op == hclsyntax.OpLogicalAnd || n.Op == hclsyntax.OpLogicalOr {
				return true
			}
		}
	}
	return false
}

func (w *paramWalker) note(name string, required, interpolated bool) {
	u := w.uses[name]
	if u == nil {
		u = &ParameterUse{Name: name}
		w.uses[name] = u
	}
	u.Required = u.Required || required
	u.Interpolated = u.Interpolated || interpolated
	if w.whole == name && u.Variable == "" {
		u.Variable = w.variable
	}
}
