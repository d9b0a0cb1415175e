package shared

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestImportsPointDown: inside internal/controller, each reconciler (claim, class, resource,
// runnerpool) imports only shared and provision, never another reconciler; provision imports
// only shared; shared imports none of them (issue 47: imports ran back up 18 times in the one
// flat package). Test files are free to wire reconcilers together.
func TestImportsPointDown(t *testing.T) {
	const base = "github.com/conductor-tf/conductor-tf/internal/controller/"
	allowed := map[string][]string{
		"shared":    nil,
		"provision": {"shared"},
	}
	dirs, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		pkg := d.Name()
		allow, lower := allowed[pkg]
		if !lower {
			allow = []string{"shared", "provision"} // a reconciler
		}
		files, _ := filepath.Glob(filepath.Join("..", pkg, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			seen++
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				to, ok := strings.CutPrefix(path, base)
				if !ok {
					continue
				}
				if !slices.Contains(allow, to) {
					t.Errorf("%s imports internal/controller/%s: %s may import only %v", f, to, pkg, allow)
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("read only %d files under internal/controller", seen)
	}
}
