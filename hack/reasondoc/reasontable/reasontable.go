// Package reasontable builds docs/reference/conditions.md: one table of every reason the
// controller puts in a condition or an event, and one of the reasons a plan waits, each with what
// it means and what to do.
//
// The reasons come from the code, read with go/ast (nothing is compiled or imported):
//   - every constant named Reason* in api/v1alpha1 (condition and event reasons);
//   - every constant named Hold* in internal/tfrunner (status.pendingPlan.reason);
//   - every string literal given as a reason in internal/controller: the reason argument of
//     Eventf and setCondition, and the Reason field of a metav1.Condition literal.
//
// What a reason means is the constant's doc comment (the part of it that names the constant, as
// in "// ReasonStateMissing: a resource that was applied has no state"), unless reasons.yaml
// gives a "means" of its own. Where it is set and what to do are in reasons.yaml, keyed by the
// reason's value. Generate fails when a reason of the code has no entry there, or an entry names
// a reason the code no longer has, so a new reason cannot reach the table without its text.
package reasontable

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Paths, relative to the repository's root.
const (
	// OutputPath is the generated page.
	OutputPath = "docs/reference/conditions.md"
	// DataPath holds where each reason is set and what to do about it.
	DataPath = "hack/reasondoc/reasons.yaml"
	// Command regenerates OutputPath; the page and the docs check name it.
	Command = "make docs"

	apiDir        = "api/v1alpha1"
	tfrunnerDir   = "internal/tfrunner"
	controllerDir = "internal/controller"
)

// Reason is one reason found in the code.
type Reason struct {
	// Value is what people see in a condition or an event.
	Value string
	// Constants are the Go constants that hold it ("v1alpha1.ReasonStateLocked"), if any.
	Constants []string
	// Doc is what the constants' doc comments say it means ("" when they say nothing of it).
	Doc string
	// Literals are the files that use it as a string literal (internal/controller/x.go).
	Literals []string
	// Stalls says it is one of v1alpha1.TerminalReasons: Ready=False with it sets Stalled=True.
	Stalls bool
}

// Entry is the text reasons.yaml keeps for one reason.
type Entry struct {
	// Where names the objects and conditions that carry it: "InfraResource Synced=False".
	Where string `json:"where"`
	// Means overrides the constant's doc comment, or stands for it when there is none.
	Means string `json:"means,omitempty"`
	// Do is what to do about it.
	Do string `json:"do"`
}

// Data is reasons.yaml.
type Data struct {
	// Reasons are condition and event reasons, keyed by value.
	Reasons map[string]Entry `json:"reasons"`
	// Holds are the reasons a plan waits (status.pendingPlan.reason), keyed by value.
	Holds map[string]Entry `json:"holds"`
}

// Collected is every reason the code has.
type Collected struct {
	Reasons []Reason
	Holds   []Reason
	// Terminal says the API has TerminalReasons (the reasons that make an object Stalled).
	Terminal bool
}

// Collect reads the reasons from the code under root.
func Collect(root string) (*Collected, error) {
	c := &Collected{}
	api, err := constants(filepath.Join(root, apiDir), "Reason", "v1alpha1")
	if err != nil {
		return nil, err
	}
	literals, err := literalReasons(root, controllerDir)
	if err != nil {
		return nil, err
	}
	for value, files := range literals {
		r := api[value]
		if r == nil {
			r = &Reason{Value: value}
			api[value] = r
		}
		r.Literals = files
	}
	stalls, err := terminalReasons(filepath.Join(root, apiDir))
	if err != nil {
		return nil, err
	}
	for _, r := range api {
		for _, name := range r.Constants {
			if stalls[strings.TrimPrefix(name, "v1alpha1.")] {
				r.Stalls = true
				c.Terminal = true
			}
		}
	}
	c.Reasons = sorted(api)
	holds, err := constants(filepath.Join(root, tfrunnerDir), "Hold", "tfrunner")
	if err != nil {
		return nil, err
	}
	c.Holds = sorted(holds)
	return c, nil
}

func sorted(m map[string]*Reason) []Reason {
	out := make([]Reason, 0, len(m))
	for _, r := range m {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Value) < strings.ToLower(out[j].Value) })
	return out
}

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

// literalReasons finds string literals used as reasons in the package in dir: the reason argument
// of Eventf(regarding, related, type, reason, action, note, …) and of setCondition(conds, gen,
// type, status, reason, message), and a Reason field's value in a composite literal. It returns
// the files (relative to root) that use each.
func literalReasons(root, dir string) (map[string][]string, error) {
	files, paths, err := parseDir(filepath.Join(root, dir))
	if err != nil {
		return nil, err
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
		rel := filepath.ToSlash(filepath.Join(dir, filepath.Base(path)))
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
				case name == "setCondition" && len(n.Args) >= 5:
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

// ReadData reads reasons.yaml under root.
func ReadData(root string) (*Data, error) {
	b, err := os.ReadFile(filepath.Join(root, DataPath))
	if err != nil {
		return nil, err
	}
	d := &Data{}
	if err := yaml.UnmarshalStrict(b, d); err != nil {
		return nil, fmt.Errorf("%s: %w", DataPath, err)
	}
	return d, nil
}

// Generate returns the page for the code and reasons.yaml under root. Its error lists every
// reason without an entry, or without what it means, and every entry the code does not have.
func Generate(root string) ([]byte, error) {
	c, err := Collect(root)
	if err != nil {
		return nil, err
	}
	d, err := ReadData(root)
	if err != nil {
		return nil, err
	}
	var problems []string
	problems = append(problems, check("reasons", c.Reasons, d.Reasons)...)
	problems = append(problems, check("holds", c.Holds, d.Holds)...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s does not match the code:\n  %s\nEdit %s, then run `%s`",
			DataPath, strings.Join(problems, "\n  "), DataPath, Command)
	}
	return render(c, d), nil
}

func check(section string, found []Reason, entries map[string]Entry) []string {
	var problems []string
	seen := map[string]bool{}
	for _, r := range found {
		seen[r.Value] = true
		e, ok := entries[r.Value]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s: %s (%s) has no entry: add where it is set, what it means (unless its doc comment says) and what to do",
				section, r.Value, origin(r)))
		case strings.TrimSpace(e.Where) == "" || strings.TrimSpace(e.Do) == "":
			problems = append(problems, fmt.Sprintf("%s: %s needs both where and do", section, r.Value))
		case strings.TrimSpace(e.Means) == "" && r.Doc == "":
			problems = append(problems, fmt.Sprintf("%s: %s (%s) has no doc comment saying what it means: write one (\"// %s: …\") or give means",
				section, r.Value, origin(r), firstOr(r.Constants, r.Value)))
		}
	}
	var stale []string
	for v := range entries {
		if !seen[v] {
			stale = append(stale, v)
		}
	}
	sort.Strings(stale)
	for _, v := range stale {
		problems = append(problems, fmt.Sprintf("%s: %s is not a reason of the code any more: remove its entry", section, v))
	}
	return problems
}

func origin(r Reason) string {
	if len(r.Constants) > 0 {
		return strings.Join(r.Constants, ", ")
	}
	return "a literal in " + strings.Join(r.Literals, ", ")
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		_, name, _ := strings.Cut(s[0], ".")
		return name
	}
	return def
}

// Anchor is the id of a reason's row in the page: conditions.md#statelocked.
func Anchor(value string) string { return strings.ToLower(value) }

func render(c *Collected, d *Data) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!-- Generated by `%s` (hack/reasondoc) from the code's reason constants and %s. Do not edit. -->\n\n", Command, DataPath)
	b.WriteString("# Condition and event reasons\n\n")
	b.WriteString("Every reason conductor-tf writes into a condition (`kubectl get … -o yaml`, `status.conditions`) or\n")
	b.WriteString("an event (`kubectl describe`, `kubectl get events`), with what it means and what to do. A claim's\n")
	b.WriteString("`Ready` condition, once the claim is bound, repeats its resource's `Ready` reason and message, so\n")
	b.WriteString("resource reasons show on claims too. Reasons of waiting plans (`status.pendingPlan.reason`) are\n")
	b.WriteString("[below](#why-a-plan-waits).\n\n")
	if c.Terminal {
		b.WriteString("GitOps tools read health from two conditions the controller derives from `Ready`. A reason marked\n")
		b.WriteString("**stalls** is one that no retry clears: with `Ready=False` it sets `Stalled=True` (kstatus *Failed*,\n")
		b.WriteString("Argo CD *Degraded*); any other `Ready` that is not True sets `Reconciling=True` (kstatus\n")
		b.WriteString("*InProgress*). Both carry `Ready`'s reason and message.\n\n")
	}
	fmt.Fprintf(&b, "The table is generated from the code: `%s` regenerates it, and `make test` fails when a reason\n", Command)
	b.WriteString("of the code is missing from it or it is stale.\n\n")
	b.WriteString("| Reason | Where | What it means | What to do |\n|---|---|---|---|\n")
	for _, r := range c.Reasons {
		row(&b, "", r, d.Reasons[r.Value])
	}
	b.WriteString("\n## Why a plan waits\n\n")
	b.WriteString("A plan the approval gate stops is kept in the resource's `status.pendingPlan`; its `reason` is one of\n")
	b.WriteString("these (`kubectl conductor plan` shows it, and the series `conductor_tf_approvals_pending{reason}`\n")
	b.WriteString("counts them). The resource's `Synced` condition says `WaitingForApproval`, `ReplaceNeedsApproval`,\n")
	b.WriteString("`InterruptedCreate` or `PlanDiscarded` meanwhile.\n\n")
	b.WriteString("| pendingPlan.reason | Where | What it means | What to do |\n|---|---|---|---|\n")
	for _, r := range c.Holds {
		row(&b, "plan-", r, d.Holds[r.Value])
	}
	return b.Bytes()
}

// row writes one reason; its anchor is prefix+Anchor(value).
func row(b *bytes.Buffer, prefix string, r Reason, e Entry) {
	means := strings.TrimSpace(e.Means)
	if means == "" {
		means = r.Doc
	}
	where := cell(e.Where)
	if r.Stalls {
		where += "; **stalls**"
	}
	fmt.Fprintf(b, "| <a id=\"%s\"></a>`%s` | %s | %s | %s |\n", prefix+Anchor(r.Value), r.Value, where, cell(means), cell(e.Do))
}

// cell puts text on one line and escapes what would end a table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "|", `\|`)
}

// ErrStale is returned by Check when the page differs from what Generate makes.
var ErrStale = errors.New(OutputPath + " is stale: run `" + Command + "`")

// Check compares the page under root with what Generate makes.
func Check(root string) error {
	want, err := Generate(root)
	if err != nil {
		return err
	}
	have, err := os.ReadFile(filepath.Join(root, OutputPath))
	if err != nil {
		return fmt.Errorf("%w (%v)", ErrStale, err)
	}
	if !bytes.Equal(have, want) {
		return ErrStale
	}
	return nil
}
