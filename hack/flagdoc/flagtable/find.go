package flagtable

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"
)

// CommandLine names the flag set of package flag's own functions (flag.String, flag.CommandLine):
// the command's top-level flags.
const CommandLine = ""

// definer is how one method or function of package flag defines a flag: where its name, default
// and usage are among the call's arguments (-1: none), and the type `--help` gives the value.
type definer struct {
	name, value, usage int
	typ                string
}

// definers are the calls that define a flag, as functions of package flag and methods of
// *flag.FlagSet alike. Var is missing on purpose: its default is whatever the value's String
// says at run time, which the source does not give; a flag defined with it fails Collect.
var definers = map[string]definer{}

func init() {
	for method, typ := range map[string]string{
		"Bool": "bool", "Duration": "duration", "Float64": "float", "Int": "int", "Int64": "int",
		"String": "string", "Uint": "uint", "Uint64": "uint",
	} {
		definers[method] = definer{name: 0, value: 1, usage: 2, typ: typ}
		definers[method+"Var"] = definer{name: 1, value: 2, usage: 3, typ: typ}
	}
	definers["TextVar"] = definer{name: 1, value: 2, usage: 3, typ: "value"}
	definers["Func"] = definer{name: 0, value: -1, usage: 1, typ: "value"}
	definers["BoolFunc"] = definer{name: 0, value: -1, usage: 1, typ: "bool"}
}

// finder walks the command's package for the calls that define flags and works out, for each, the
// flag sets it defines them on: flag.CommandLine, a set made by flag.NewFlagSet("name", …), or a
// *flag.FlagSet parameter, which stands for whatever the function's callers pass (a helper that
// registers the same flags on two commands defines them on both).
type finder struct {
	p        *program
	pkg      *pkg
	defs     map[types.Object]ast.Expr       // a variable's value, as last given
	assigned map[types.Object]int            // how often a variable is given a value: defs holds only when once
	prm      map[*types.Var]param            // a function's parameters
	call     map[*types.Func][]*ast.CallExpr // calls of the package's functions
}

type param struct {
	fn    *types.Func
	index int
}

// site is a call that defines flags (a definer) or hands a flag set to another package's code
// (an external registration), with the sets it reaches.
type site struct {
	call   *ast.CallExpr
	method string
	sets   []string
}

func newFinder(p *program, lp *pkg) *finder {
	f := &finder{p: p, pkg: lp, defs: map[types.Object]ast.Expr{}, assigned: map[types.Object]int{}, prm: map[*types.Var]param{}, call: map[*types.Func][]*ast.CallExpr{}}
	for _, file := range lp.files {
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				fn, _ := lp.info.Defs[n.Name].(*types.Func)
				if fn == nil {
					return true
				}
				sig := fn.Type().(*types.Signature)
				for i := 0; i < sig.Params().Len(); i++ {
					f.prm[sig.Params().At(i)] = param{fn: fn, index: i}
				}
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i, lhs := range n.Lhs {
						f.define(lhs, n.Rhs[i])
					}
				}
			case *ast.ValueSpec:
				if len(n.Names) == len(n.Values) {
					for i, name := range n.Names {
						f.define(name, n.Values[i])
					}
				}
			case *ast.CallExpr:
				if fn, ok := lp.info.Uses[calleeIdent(n.Fun)].(*types.Func); ok && fn.Pkg() == lp.types {
					f.call[fn] = append(f.call[fn], n)
				}
			}
			return true
		})
	}
	return f
}

// define records the value a variable is given, where it is an identifier.
func (f *finder) define(lhs, rhs ast.Expr) {
	id, ok := lhs.(*ast.Ident)
	if !ok {
		return
	}
	obj := f.pkg.info.Defs[id]
	if obj == nil {
		obj = f.pkg.info.Uses[id]
	}
	if obj != nil {
		f.defs[obj] = rhs
		f.assigned[obj]++
	}
}

// sites returns every call of the package that defines flags or hands a flag set elsewhere.
func (f *finder) sites() (defs, external []site, err error) {
	for _, file := range f.pkg.files {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || err != nil {
				return err == nil
			}
			s, ok, e := f.definition(call)
			if e != nil || ok {
				err = e
				defs = append(defs, s)
				return true
			}
			s, ok, e = f.registration(call)
			if e != nil || ok {
				err = e
				external = append(external, s)
			}
			return true
		})
	}
	return defs, external, err
}

// definition recognises flag.String(…), fs.DurationVar(…) and the like.
func (f *finder) definition(call *ast.CallExpr) (site, bool, error) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return site{}, false, nil
	}
	onFlagSet := f.isFlagPackage(sel.X) || isFlagSet(f.pkg.info.TypeOf(sel.X))
	if onFlagSet && sel.Sel.Name == "Var" {
		return site{}, false, fmt.Errorf("%s: a flag defined with Var has the default its value's String gives at run time, which the source does not say: define it with TextVar, Func or a typed definer", f.pos(call))
	}
	d, ok := definers[sel.Sel.Name]
	if !ok || !onFlagSet || len(call.Args) != argCount(d) {
		return site{}, false, nil
	}
	if f.isFlagPackage(sel.X) {
		return site{call: call, method: sel.Sel.Name, sets: []string{CommandLine}}, true, nil
	}
	sets, err := f.setsOf(sel.X, 0)
	if err != nil {
		return site{}, false, fmt.Errorf("%s: %w", f.pos(call), err)
	}
	return site{call: call, method: sel.Sel.Name, sets: sets}, true, nil
}

// registration recognises a call of another package's code given a flag set, as
// zapOpts.BindFlags(flag.CommandLine).
func (f *finder) registration(call *ast.CallExpr) (site, bool, error) {
	if fn, ok := f.pkg.info.Uses[calleeIdent(call.Fun)].(*types.Func); ok && (fn.Pkg() == nil || fn.Pkg() == f.pkg.types || fn.Pkg().Path() == "flag") {
		return site{}, false, nil // the package's own helpers are followed through their parameters
	}
	for _, arg := range call.Args {
		if !isFlagSet(f.pkg.info.TypeOf(arg)) {
			continue
		}
		sets, err := f.setsOf(arg, 0)
		if err != nil {
			return site{}, false, fmt.Errorf("%s: %w", f.pos(call), err)
		}
		return site{call: call, sets: sets}, true, nil
	}
	return site{}, false, nil
}

// setsOf says which flag sets an expression of type *flag.FlagSet can be.
func (f *finder) setsOf(e ast.Expr, depth int) ([]string, error) {
	if depth > 8 {
		return nil, fmt.Errorf("cannot tell which flag set %s is: too many calls deep", f.source(e))
	}
	e = ast.Unparen(e)
	if sel, ok := e.(*ast.SelectorExpr); ok && f.isFlagPackage(sel.X) && sel.Sel.Name == "CommandLine" {
		return []string{CommandLine}, nil
	}
	if call, ok := e.(*ast.CallExpr); ok {
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && f.isFlagPackage(sel.X) && sel.Sel.Name == "NewFlagSet" && len(call.Args) == 2 {
			name, err := f.constString(call.Args[0])
			if err != nil {
				return nil, fmt.Errorf("the name of flag.NewFlagSet(%s, …): %w", f.source(call.Args[0]), err)
			}
			return []string{name}, nil
		}
	}
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil, fmt.Errorf("cannot tell which flag set %s is", f.source(e))
	}
	obj := f.pkg.info.Uses[id]
	if v, ok := obj.(*types.Var); ok {
		if p, ok := f.prm[v]; ok {
			return f.setsOfParam(p, depth)
		}
	}
	if rhs, ok := f.defs[obj]; ok && f.assigned[obj] == 1 {
		return f.setsOf(rhs, depth+1)
	}
	return nil, fmt.Errorf("cannot tell which flag set %s is", f.source(e))
}

// setsOfParam is every set the callers of a function pass as its parameter.
func (f *finder) setsOfParam(p param, depth int) ([]string, error) {
	calls := f.call[p.fn]
	if len(calls) == 0 {
		return nil, fmt.Errorf("%s is given a flag set but never called", p.fn.Name())
	}
	seen := map[string]bool{}
	var sets []string
	for _, c := range calls {
		if p.index >= len(c.Args) {
			return nil, fmt.Errorf("%s: a variadic flag set parameter of %s", f.pos(c), p.fn.Name())
		}
		got, err := f.setsOf(c.Args[p.index], depth+1)
		if err != nil {
			return nil, err
		}
		for _, s := range got {
			if !seen[s] {
				seen[s] = true
				sets = append(sets, s)
			}
		}
	}
	return sets, nil
}

// isFlagPackage says an expression is the name of the imported package flag.
func (f *finder) isFlagPackage(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	if !ok {
		return false
	}
	pn, ok := f.pkg.info.Uses[id].(*types.PkgName)
	return ok && pn.Imported().Path() == "flag"
}

// isFlagSet says a type is *flag.FlagSet.
func isFlagSet(t types.Type) bool {
	ptr, ok := t.(*types.Pointer)
	if !ok {
		return false
	}
	named, ok := ptr.Elem().(*types.Named)
	return ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == "flag" && named.Obj().Name() == "FlagSet"
}

func argCount(d definer) int {
	n := 0
	for _, i := range []int{d.name, d.value, d.usage} {
		n = max(n, i+1)
	}
	if d.value < 0 {
		n++ // Func and BoolFunc: name, usage, fn
	}
	return n
}

// calleeIdent is the identifier naming a call's function: f in f(…) and x.f(…).
func calleeIdent(fun ast.Expr) *ast.Ident {
	switch fun := ast.Unparen(fun).(type) {
	case *ast.Ident:
		return fun
	case *ast.SelectorExpr:
		return fun.Sel
	case *ast.IndexExpr:
		return calleeIdent(fun.X)
	}
	return nil
}

// source is an expression as written, for messages.
func (f *finder) source(e ast.Expr) string { return types.ExprString(e) }

// pos is where a node is, relative to the repository's root.
func (f *finder) pos(n ast.Node) string {
	p := f.p.fset.Position(n.Pos())
	if rel, ok := strings.CutPrefix(p.Filename, f.p.root+"/"); ok {
		p.Filename = rel
	}
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}
