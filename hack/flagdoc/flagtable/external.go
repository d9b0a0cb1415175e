package flagtable

import (
	"flag"
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Flags other packages define. Their source is not the command's, so they are listed by running
// the very code that defines them on a flag set of flagtable's own: the page shows what the
// version of go.mod defines.

// registrar defines another package's flags on fs, as the call s of the command does.
type registrar struct {
	// from names the code the flags come from, in the page.
	from string
	bind func(f *finder, s site, fs *flag.FlagSet) error
}

// registrars are the calls that hand a flag set to other code, by the function or method called
// ("import/path.Type.Method", "import/path.Func"). A call of one not listed fails Collect.
var registrars = map[string]registrar{
	"sigs.k8s.io/controller-runtime/pkg/log/zap.Options.BindFlags": {
		from: "controller-runtime's logger (`zap.Options.BindFlags`)",
		bind: bindZap,
	},
}

// linked are packages that define flags on flag.CommandLine in their init when a command links
// them, with what they define.
var linked = map[string]registrar{
	"sigs.k8s.io/controller-runtime/pkg/client/config": {
		from: "controller-runtime's client configuration, linked in (`config.RegisterFlags`)",
		bind: func(_ *finder, _ site, fs *flag.FlagSet) error { config.RegisterFlags(fs); return nil },
	},
}

// bindZap binds zap.Options as the command's literal sets them: its Development field, a
// constant, decides defaults the usage states. Any other field fails.
func bindZap(f *finder, s site, fs *flag.FlagSet) error {
	var opts zap.Options
	lit, ok := f.literalOf(s.call.Fun.(*ast.SelectorExpr).X)
	if !ok {
		return fmt.Errorf("%s: cannot find the zap.Options literal", f.pos(s.call))
	}
	for _, elt := range lit.Elts {
		kv, ok := elt.(*ast.KeyValueExpr)
		key, _ := kv.Key.(*ast.Ident)
		tv := f.pkg.info.Types[kv.Value]
		if !ok || key == nil || key.Name != "Development" || tv.Value == nil || tv.Value.Kind() != constant.Bool {
			return fmt.Errorf("%s: flagtable knows zap.Options{Development: <constant>} only (external.go)", f.pos(elt))
		}
		opts.Development = constant.BoolVal(tv.Value)
	}
	opts.BindFlags(fs)
	return nil
}

// callee names what a registration calls: "import/path.Type.Method" for a method of a variable
// given a composite literal, "import/path.Func" for a function of another package.
func (f *finder) callee(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return types.ExprString(call.Fun)
	}
	if id, ok := sel.X.(*ast.Ident); ok {
		if pn, ok := f.pkg.info.Uses[id].(*types.PkgName); ok {
			return pn.Imported().Path() + "." + sel.Sel.Name
		}
	}
	if lit, ok := f.literalOf(sel.X); ok {
		tsel := lit.Type.(*ast.SelectorExpr) // literalOf keeps pkg.Type literals only
		if pkgID, ok := tsel.X.(*ast.Ident); ok {
			if pn, ok := f.pkg.info.Uses[pkgID].(*types.PkgName); ok {
				return pn.Imported().Path() + "." + tsel.Sel.Name + "." + sel.Sel.Name
			}
		}
	}
	return types.ExprString(call.Fun)
}

// literalOf is the composite literal a variable (or &variable) was given once.
func (f *finder) literalOf(e ast.Expr) (*ast.CompositeLit, bool) {
	e = ast.Unparen(e)
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = u.X
	}
	id, ok := e.(*ast.Ident)
	if !ok {
		return nil, false
	}
	obj := f.pkg.info.Uses[id]
	v, ok := f.defs[obj]
	if !ok || f.assigned[obj] != 1 {
		return nil, false
	}
	if u, ok := ast.Unparen(v).(*ast.UnaryExpr); ok {
		v = u.X
	}
	lit, ok := v.(*ast.CompositeLit)
	if ok {
		if _, isSel := lit.Type.(*ast.SelectorExpr); !isSel {
			return nil, false
		}
	}
	return lit, ok
}

// externalFlags lists the flags a registration defines, as rows from fs.
func externalFlags(fs *flag.FlagSet, from string) []Flag {
	var out []Flag
	fs.VisitAll(func(fl *flag.Flag) {
		typ, usage := flag.UnquoteUsage(fl)
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			typ = "bool"
		}
		out = append(out, Flag{
			Name: fl.Name, Type: typ, Usage: usage, From: from,
			Default: phrase{text: fl.DefValue, code: true}.markdown(),
		})
	})
	return out
}

// linkedFlags runs `go list -deps` for the packages the command links and lists the flags those of
// linked define on flag.CommandLine.
func (p *program) linkedFlags(dir string) ([]Flag, error) {
	out, err := goCommand(p.root, "list", "-e", "-deps", "-f", "{{.ImportPath}}", "./"+strings.TrimPrefix(dir, "./"))
	if err != nil {
		return nil, err
	}
	deps := strings.Fields(string(out))
	sort.Strings(deps)
	var flags []Flag
	for _, d := range deps {
		if r, ok := linked[d]; ok {
			fs := flag.NewFlagSet(d, flag.ContinueOnError)
			if err := r.bind(nil, site{}, fs); err != nil {
				return nil, err
			}
			flags = append(flags, externalFlags(fs, r.from)...)
		}
	}
	return flags, nil
}
