package reasontable

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// parseDir parses the package in dir, without its tests.
func parseDir(dir string) ([]*ast.File, []string, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(names)
	var files []*ast.File
	var paths []string
	fset := token.NewFileSet()
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
		paths = append(paths, n)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no Go files in %s", dir)
	}
	return files, paths, nil
}

// constants finds the string constants of the package in dir whose names start with prefix
// followed by an upper-case letter, keyed by value, with what their doc comments say of them.
func constants(dir, prefix, pkg string) (map[string]*Reason, error) {
	files, _, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*Reason{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			var prevDoc string
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				doc := ""
				if vs.Doc != nil {
					doc = vs.Doc.Text()
				}
				for i, name := range vs.Names {
					if !isConstName(name.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					value, err := strconv.Unquote(lit.Value)
					if err != nil {
						return nil, err
					}
					r := out[value]
					if r == nil {
						r = &Reason{Value: value}
						out[value] = r
					}
					r.Constants = append(r.Constants, pkg+"."+name.Name)
					// A constant without a doc comment of its own may be described in the one
					// before it ("ReasonStateNotSaved: …. ReasonStateSaved: it was saved later.").
					if means := docFor(name.Name, doc); means != "" && r.Doc == "" {
						r.Doc = means
					} else if means := docFor(name.Name, prevDoc); doc == "" && means != "" && r.Doc == "" {
						r.Doc = means
					}
				}
				if doc != "" {
					prevDoc = doc
				}
			}
		}
	}
	return out, nil
}

// terminalReasons returns the names of the constants that are keys of the map TerminalReasons in
// the package in dir (none when it has no such map).
func terminalReasons(dir string) (map[string]bool, error) {
	files, _, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if name.Name != "TerminalReasons" || i >= len(vs.Values) {
						continue
					}
					cl, ok := vs.Values[i].(*ast.CompositeLit)
					if !ok {
						return nil, fmt.Errorf("%s: TerminalReasons is not a map literal", dir)
					}
					for _, elt := range cl.Elts {
						kv, ok := elt.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						if k, ok := kv.Key.(*ast.Ident); ok {
							out[k.Name] = true
						}
					}
				}
			}
		}
	}
	return out, nil
}

// isConstName reports whether name is prefix followed by an upper-case ASCII letter
// ("ReasonStateLocked" for "Reason"; not "Reasons", nor "Reason" alone).
func isConstName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	return ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z'
}

// lead matches the start of what a doc comment says of one or more constants:
// "ReasonX:", "ReasonX (event):", "ReasonX and ReasonY:".
var (
	lead = regexp.MustCompile(`\b([A-Z][A-Za-z0-9]*(?:,? (?:and|or) [A-Z][A-Za-z0-9]*)*)(?: \([a-z ]+\))?:\s`)
	word = regexp.MustCompile(`[A-Z][A-Za-z0-9]*`)
)

// docFor returns the part of doc that describes the constant name: from a lead naming it to the
// next lead (or the end), capitalised, on one line; "" when no lead names it.
func docFor(name, doc string) string {
	doc = strings.Join(strings.Fields(doc), " ")
	locs := lead.FindAllStringSubmatchIndex(doc+" ", -1)
	for i, loc := range locs {
		names := word.FindAllString(doc[loc[2]:loc[3]], -1)
		found := false
		for _, n := range names {
			found = found || n == name
		}
		if !found {
			continue
		}
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		text := strings.TrimRight(strings.TrimSpace(doc[min(loc[1], len(doc)):end]), ";, ")
		if text == "" {
			return ""
		}
		if first, _, _ := strings.Cut(text, " "); strings.ToLower(first) == first && !strings.ContainsAny(first, "._") {
			text = strings.ToUpper(text[:1]) + text[1:] // "a run's state…", not "spec.kubernetesAccess…"
		}
		if !strings.HasSuffix(text, ".") {
			text += "."
		}
		return text
	}
	return ""
}

// literalReasons finds string literals used as reasons in the packages under dir (dir's and its
// sub-packages', as internal/controller/resource): the reason argument of Eventf(regarding,
// related, type, reason, action, note, …) and of setCondition or SetCondition(conds, gen, type,
// status, reason, message), and a Reason field's value in a composite literal. It returns the
// files (relative to root) that use each.
func literalReasons(root, dir string) (map[string][]string, error) {
	var files []*ast.File
	var paths []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if names, _ := filepath.Glob(filepath.Join(p, "*.go")); len(names) == 0 {
			return nil
		}
		pf, pp, err := parseDir(p)
		if err != nil && !strings.HasPrefix(err.Error(), "no Go files") {
			return err
		}
		files, paths = append(files, pf...), append(paths, pp...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files under %s", dir)
	}
	out := map[string][]string{}
	add := func(e ast.Expr, path string) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil || v == "" {
			return
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return
		}
		rel = filepath.ToSlash(rel)
		for _, p := range out[v] {
			if p == rel {
				return
			}
		}
		out[v] = append(out[v], rel)
	}
	for i, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				name := ""
				switch fn := n.Fun.(type) {
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				case *ast.Ident:
					name = fn.Name
				}
				switch {
				case name == "Eventf" && len(n.Args) >= 4:
					add(n.Args[3], paths[i])
				case (name == "setCondition" || name == "SetCondition") && len(n.Args) >= 5:
					add(n.Args[4], paths[i])
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Reason" {
					add(n.Value, paths[i])
				}
			}
			return true
		})
	}
	return out, nil
}
