package flagtable

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"strings"
	"time"
)

// A default is said in the page as the source gives it. A constant is its value. A few calls are
// said in words; any other expression fails Collect, naming the flag, so that the page never
// shows a value of the machine that generated it (the number of its CPUs, its host name).
//
// words are the calls of other packages a default may make (set in init: they describe their
// arguments in turn).
var words map[string]func(f *finder, args []ast.Expr) (phrase, error)

// helpers are the command's own functions a default may call, by name, each with what it must do
// for the words to be true.
var helpers map[string]func(f *finder, args []ast.Expr) (phrase, error)

func init() {
	words = map[string]func(f *finder, args []ast.Expr) (phrase, error){
		"os.Getenv": func(f *finder, args []ast.Expr) (phrase, error) {
			name, err := f.constString(args[0])
			return phrase{text: "$" + name, code: true}, err
		},
		"os.TempDir":     func(*finder, []ast.Expr) (phrase, error) { return phrase{text: "$TMPDIR", code: true}, nil },
		"runtime.NumCPU": func(*finder, []ast.Expr) (phrase, error) { return phrase{text: "the number of CPUs"}, nil },
		"path/filepath.Join": func(f *finder, args []ast.Expr) (phrase, error) {
			var parts []string
			for _, a := range args {
				p, err := f.describe(a)
				if err != nil {
					return phrase{}, err
				}
				if !p.code {
					return phrase{}, fmt.Errorf("a path made of %q", p.text)
				}
				parts = append(parts, p.text)
			}
			return phrase{text: strings.Join(parts, "/"), code: true}, nil
		},
	}
	helpers = map[string]func(f *finder, args []ast.Expr) (phrase, error){
		// envOr(name, def) is the variable name of the environment when it is set and not empty, else def.
		"envOr": func(f *finder, args []ast.Expr) (phrase, error) {
			name, err := f.constString(args[0])
			if err != nil {
				return phrase{}, err
			}
			def, err := f.describe(args[1])
			if err != nil {
				return phrase{}, err
			}
			return phrase{text: fmt.Sprintf("`$%s`, else %s", name, def.markdown())}, nil
		},
		// hostname() is os.Hostname's name.
		"hostname": func(*finder, []ast.Expr) (phrase, error) { return phrase{text: "the host name"}, nil },
	}
}

// phrase is a default in words: code (a value, a variable, a path) or prose.
type phrase struct {
	text string
	code bool
}

func (p phrase) markdown() string {
	if !p.code {
		return p.text
	}
	if p.text == "" {
		return "—"
	}
	return "`" + p.text + "`"
}

// defaultOf says a flag's default, the expression e, of a flag whose values are of type typ.
func (f *finder) defaultOf(e ast.Expr, typ string) (string, error) {
	if tv, ok := f.pkg.info.Types[e]; ok && tv.Value != nil {
		v := tv.Value
		switch {
		case typ == "duration" && v.Kind() == constant.Int:
			d, _ := constant.Int64Val(v)
			return phrase{text: shortDuration(time.Duration(d)), code: true}.markdown(), nil
		case v.Kind() == constant.String:
			return phrase{text: constant.StringVal(v), code: true}.markdown(), nil
		default:
			return phrase{text: v.ExactString(), code: true}.markdown(), nil
		}
	}
	p, err := f.describe(e)
	if err != nil {
		return "", err
	}
	return p.markdown(), nil
}

// describe says a default that is not a constant: a call of words or helpers, or a constant
// part of one.
func (f *finder) describe(e ast.Expr) (phrase, error) {
	e = ast.Unparen(e)
	if tv, ok := f.pkg.info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
		return phrase{text: constant.StringVal(tv.Value), code: true}, nil
	}
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return phrase{}, fmt.Errorf("%s is no constant and no call flagtable can say in words", types.ExprString(e))
	}
	fn, ok := f.pkg.info.Uses[calleeIdent(call.Fun)].(*types.Func)
	if !ok {
		return phrase{}, fmt.Errorf("%s calls a function flagtable cannot resolve", types.ExprString(e))
	}
	if fn.Pkg() == f.pkg.types {
		if say, ok := helpers[fn.Name()]; ok {
			return say(f, call.Args)
		}
	} else if say, ok := words[fn.Pkg().Path()+"."+fn.Name()]; ok {
		return say(f, call.Args)
	}
	return phrase{}, fmt.Errorf("%s: flagtable cannot say %s in words (value.go: words, helpers)", types.ExprString(e), fn.FullName())
}

// constString is a constant string expression's value.
func (f *finder) constString(e ast.Expr) (string, error) {
	if tv, ok := f.pkg.info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
		return constant.StringVal(tv.Value), nil
	}
	return "", fmt.Errorf("%s is not a constant string", types.ExprString(e))
}

// text is a string the source spells out: a constant, a sum of such strings, a variable of the
// package given one once, or strings.Join of a []string literal of them (or a variable given one)
// and such a separator. A usage is most often a constant; a usage shared by two commands is a
// variable or constant of the package.
func (f *finder) text(e ast.Expr) (string, error) {
	e = ast.Unparen(e)
	if s, err := f.constString(e); err == nil {
		return s, nil
	}
	switch e := e.(type) {
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, err := f.text(e.X)
			if err != nil {
				return "", err
			}
			y, err := f.text(e.Y)
			return x + y, err
		}
	case *ast.Ident:
		if v, ok := f.valueOf(e); ok {
			return f.text(v)
		}
	case *ast.CallExpr:
		if fn, ok := f.pkg.info.Uses[calleeIdent(e.Fun)].(*types.Func); ok && fn.FullName() == "strings.Join" {
			list, err := f.list(e.Args[0])
			if err != nil {
				return "", err
			}
			sep, err := f.text(e.Args[1])
			return strings.Join(list, sep), err
		}
	}
	return "", fmt.Errorf("%s is no string flagtable can spell out", types.ExprString(e))
}

// list is a []string the source spells out: a literal of strings text can spell, or a variable of
// the package given one once.
func (f *finder) list(e ast.Expr) ([]string, error) {
	e = ast.Unparen(e)
	if id, ok := e.(*ast.Ident); ok {
		if v, ok := f.valueOf(id); ok {
			return f.list(v)
		}
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("%s is no list flagtable can spell out", types.ExprString(e))
	}
	var out []string
	for _, elt := range lit.Elts {
		s, err := f.text(elt)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// valueOf is the value of a package-level variable given one once and never assigned again.
func (f *finder) valueOf(id *ast.Ident) (ast.Expr, bool) {
	v, ok := f.pkg.info.Uses[id].(*types.Var)
	if !ok || v.Parent() != f.pkg.types.Scope() || f.assigned[v] != 1 {
		return nil, false
	}
	e, ok := f.defs[v]
	return e, ok
}

// shortDuration is a duration as a person writes it: 10m, 1h, 90s (time.Duration says 10m0s).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
