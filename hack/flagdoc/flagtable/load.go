package flagtable

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// program is the command's package, type-checked with go/types from source, and what it needs of
// the packages it imports. Nothing is compiled:
//   - the command's own package is checked whole, function bodies included;
//   - a package of this module is checked from its constant and type declarations only (enough
//     for a default such as statebackend.DefaultHistoryLimit or 10 * time.Minute);
//   - a standard package is read from its export data, which `go list -export` names (one call);
//   - any other package is an empty stand-in.
//
// Errors of the check are ignored: a stand-in leaves its users untyped, which is fine as long as
// no flag's name, default or usage depends on them. What the flags need is evaluated on its own
// (value.go), and fails there, naming the flag, when it cannot be.
type program struct {
	root, module string
	fset         *token.FileSet
	local        map[string]*pkg   // this module's packages, by import path
	exports      map[string]string // a standard package's export data file, by import path
	gc           types.Importer    // reads export data from exports
	checked      map[string]*types.Package
}

// pkg is one package of this module.
type pkg struct {
	path, dir string
	files     []*ast.File
	info      *types.Info
	types     *types.Package
}

// load parses the package in dir (relative to root), whole, and the constant and type declarations
// of every package of this module it imports, directly or not, then type-checks them.
func load(root, dir string) (*program, *pkg, error) {
	module, err := modulePath(root)
	if err != nil {
		return nil, nil, err
	}
	p := &program{root: root, module: module, fset: token.NewFileSet(), local: map[string]*pkg{}, checked: map[string]*types.Package{}}
	mainPath := path.Join(module, filepath.ToSlash(dir))
	if err := p.parse(mainPath, true); err != nil {
		return nil, nil, err
	}
	if err := p.readExports(); err != nil {
		return nil, nil, err
	}
	p.gc = importer.ForCompiler(p.fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := p.exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	main := p.local[mainPath]
	if _, err := p.Import(mainPath); err != nil {
		return nil, nil, err
	}
	return p, main, nil
}

// parse reads the package importPath of this module, and the ones it imports, recursively.
func (p *program) parse(importPath string, whole bool) error {
	if _, ok := p.local[importPath]; ok {
		return nil
	}
	dir := filepath.Join(p.root, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(importPath, p.module), "/")))
	bp, err := build.Default.ImportDir(dir, 0)
	if err != nil {
		// A package that is missing (the tree moves under an edit) is a stand-in: whatever needs
		// it fails later, naming the flag.
		if _, missing := err.(*build.NoGoError); missing || os.IsNotExist(err) || !exists(dir) {
			return nil
		}
		return fmt.Errorf("%s: %w", importPath, err)
	}
	lp := &pkg{path: importPath, dir: dir}
	p.local[importPath] = lp
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if !whole {
			f.Decls = declarationsOnly(f.Decls)
		}
		lp.files = append(lp.files, f)
	}
	for _, f := range lp.files {
		for _, imp := range f.Imports {
			if ip := importPathOf(imp); p.isLocal(ip) {
				if err := p.parse(ip, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// declarationsOnly keeps a file's imports and its constant and type declarations.
func declarationsOnly(decls []ast.Decl) []ast.Decl {
	var kept []ast.Decl
	for _, d := range decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok != token.VAR {
			kept = append(kept, g)
		}
	}
	return kept
}

// readExports asks `go list` once where the export data of every standard package the parsed
// files import is.
func (p *program) readExports() error {
	std := map[string]bool{}
	for _, lp := range p.local {
		for _, f := range lp.files {
			for _, imp := range f.Imports {
				if ip := importPathOf(imp); isStandard(ip) && ip != "C" && ip != "unsafe" {
					std[ip] = true
				}
			}
		}
	}
	p.exports = map[string]string{}
	if len(std) == 0 {
		return nil
	}
	args := []string{"list", "-e", "-export", "-f", "{{.ImportPath}}\t{{.Export}}"}
	for ip := range std {
		args = append(args, ip)
	}
	sort.Strings(args[5:])
	out, err := goCommand(p.root, args...)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if ip, file, ok := strings.Cut(sc.Text(), "\t"); ok && file != "" {
			p.exports[ip] = file
		}
	}
	return sc.Err()
}

// Import is the importer of the check (types.Importer).
func (p *program) Import(importPath string) (*types.Package, error) {
	if tp, ok := p.checked[importPath]; ok {
		return tp, nil
	}
	var tp *types.Package
	switch lp := p.local[importPath]; {
	case importPath == "unsafe":
		tp = types.Unsafe
	case lp != nil:
		lp.info = &types.Info{
			Types: map[ast.Expr]types.TypeAndValue{},
			Defs:  map[*ast.Ident]types.Object{},
			Uses:  map[*ast.Ident]types.Object{},
		}
		conf := types.Config{Importer: p, Error: func(error) {}, FakeImportC: true}
		tp, _ = conf.Check(importPath, p.fset, lp.files, lp.info) // errors ignored: see program
		lp.types = tp
	case isStandard(importPath) && p.exports[importPath] != "":
		var err error
		if tp, err = p.gc.Import(importPath); err != nil {
			return nil, err
		}
	default:
		tp = types.NewPackage(importPath, path.Base(importPath))
		tp.MarkComplete()
	}
	p.checked[importPath] = tp
	return tp, nil
}

func (p *program) isLocal(importPath string) bool {
	return importPath == p.module || strings.HasPrefix(importPath, p.module+"/")
}

// isStandard says a path is of the standard library: its first element has no dot.
func isStandard(importPath string) bool {
	first, _, _ := strings.Cut(importPath, "/")
	return !strings.Contains(first, ".")
}

func importPathOf(imp *ast.ImportSpec) string { return strings.Trim(imp.Path.Value, "\"`") }

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// modulePath reads the module's path from root/go.mod.
func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), "\""), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod names no module", root)
}

// goCommand runs the go command in dir and returns its standard output.
func goCommand(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v: %s", strings.Join(args[:2], " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
