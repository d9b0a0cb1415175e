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
// flat package). A reconciler's parts in packages of their own beneath it (resource/secrets) are
// held to the reconciler's rule; a package may import those beneath itself, and a part the other
// parts of its reconciler (secrets names its Secrets after state's name), but a part never imports
// its reconciler (issue 66; Go refuses the circles). Test files are free to wire reconcilers
// together.
func TestImportsPointDown(t *testing.T) {
	const base = "github.com/conductor-tf/conductor-tf/internal/controller/"
	allowed := map[string][]string{
		"shared":    nil,
		"provision": {"shared"},
	}
	seen := 0
	err := filepath.WalkDir("..", func(f string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(strings.TrimPrefix(f, "../")))
		allow, lower := allowed[pkg]
		if !lower {
			allow = []string{"shared", "provision"} // a reconciler, or a part of one
		}
		seen++
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			to, ok := strings.CutPrefix(path, base)
			if !ok {
				continue
			}
			reconciler, _, part := strings.Cut(pkg, "/")
			sibling := part && strings.HasPrefix(to, reconciler+"/")
			if !slices.Contains(allow, to) && !strings.HasPrefix(to, pkg+"/") && !sibling {
				t.Errorf("%s imports internal/controller/%s: %s may import only %v, the packages beneath it and its reconciler's other parts", f, to, pkg, allow)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 20 {
		t.Fatalf("read only %d files under internal/controller", seen)
	}
}
