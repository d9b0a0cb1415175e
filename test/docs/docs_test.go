package docs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"github.com/conductor-tf/conductor-tf/hack/reasondoc/reasontable"
)

// repoRoot is the directory of go.mod above the test's working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// docPages reads README.md and every Markdown page under docs/.
func docPages(t *testing.T, root string) []*page {
	t.Helper()
	rels := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		rels = append(rels, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var pages []*page
	for _, rel := range rels {
		p, err := readPage(root, rel)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p)
	}
	return pages
}

// TestLinks: every relative link of the docs names a file or directory of the repository, and a
// fragment names a heading or an <a id> of the Markdown page it leads to.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	pages := docPages(t, root)
	byRel := map[string]*page{}
	for _, p := range pages {
		byRel[p.rel] = p
	}
	checked := 0
	for _, p := range pages {
		for _, l := range p.links() {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			file, frag, _ := strings.Cut(l.target, "#")
			rel := p.rel
			if file != "" {
				rel = path.Clean(path.Join(path.Dir(p.rel), file))
			}
			if rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(file) {
				t.Errorf("%s:%d: link %q leaves the repository", p.rel, l.line, l.target)
				continue
			}
			info, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
			if err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist", p.rel, l.line, l.target, rel)
				continue
			}
			if frag == "" || info.IsDir() || !strings.HasSuffix(rel, ".md") {
				continue
			}
			target := byRel[rel]
			if target == nil {
				if target, err = readPage(root, rel); err != nil {
					t.Fatal(err)
				}
				byRel[rel] = target
			}
			if !target.anchors[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading or anchor %q (it has: %s)", p.rel, l.line, l.target, rel, frag, anchorList(target))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the parser is broken")
	}
}

func anchorList(p *page) string {
	var a []string
	for k := range p.anchors {
		a = append(a, k)
	}
	sort.Strings(a)
	if len(a) > 12 {
		a = append(a[:12], "…")
	}
	return strings.Join(a, ", ")
}

// TestMakeTargets: every `make TARGET` the docs name is a target of the Makefile.
func TestMakeTargets(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := makefileTargets(string(b))
	if !targets["test"] || !targets["docs"] {
		t.Fatalf("the Makefile parser found no test or docs target: %v", targets)
	}
	for _, p := range docPages(t, root) {
		for _, m := range p.makeTargets() {
			for _, tg := range m.targets {
				if !targets[tg] {
					t.Errorf("%s:%d: `%s`: the Makefile has no target %q", p.rel, m.line, m.text, tg)
				}
			}
		}
	}
}

// TestYAMLSnippets: every ```yaml block parses, each of its documents, and every conductor.io object
// in it validates against the CRDs in config/crd/bases, unless the block is marked partial.
func TestYAMLSnippets(t *testing.T) {
	root := repoRoot(t)
	crds, err := loadCRDs(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	validated := 0
	for _, p := range docPages(t, root) {
		for _, b := range p.blocks {
			if b.lang != "yaml" && b.lang != "yml" {
				continue
			}
			for _, d := range yamlDocuments(b) {
				obj, err := decodeYAML(d.text)
				if err != nil {
					t.Errorf("%s:%d: YAML does not parse: %v", p.rel, d.line, err)
					continue
				}
				if obj == nil || b.partial {
					continue
				}
				apiVersion, _ := obj["apiVersion"].(string)
				kind, _ := obj["kind"].(string)
				gv, err := schema.ParseGroupVersion(apiVersion)
				if err != nil || gv.Group != "conductor.io" {
					continue
				}
				crd := crds[gv.WithKind(kind)]
				if crd == nil {
					t.Errorf("%s:%d: %s %s is not a kind of the CRDs in config/crd/bases", p.rel, d.line, apiVersion, kind)
					continue
				}
				validated++
				name, _, _ := unstructuredString(obj, "metadata", "name")
				for _, problem := range crd.validate(obj) {
					t.Errorf("%s:%d: %s %s is invalid: %s (mark a fragment with %s)", p.rel, d.line, kind, name, problem, partialMarker)
				}
			}
		}
	}
	if validated == 0 {
		t.Fatal("no conductor.io object was validated: the parser is broken")
	}
}

type yamlDoc struct {
	line int
	text string
}

// yamlDocuments splits a block at its "---" lines.
func yamlDocuments(b block) []yamlDoc {
	var out []yamlDoc
	cur := yamlDoc{line: b.line + 1}
	var lines []string
	for i, line := range strings.Split(b.text, "\n") {
		if strings.HasPrefix(line, "---") && strings.TrimSpace(strings.SplitN(line[3:], "#", 2)[0]) == "" {
			cur.text = strings.Join(lines, "\n")
			out = append(out, cur)
			cur, lines = yamlDoc{line: b.line + 2 + i}, nil
			continue
		}
		lines = append(lines, line)
	}
	cur.text = strings.Join(lines, "\n")
	return append(out, cur)
}

// decodeYAML parses one YAML document strictly (duplicate keys refused) and decodes it as the API
// server decodes JSON. It returns nil for an empty document or one that is not a mapping.
func decodeYAML(text string) (map[string]interface{}, error) {
	j, err := yaml.YAMLToJSONStrict([]byte(text))
	if err != nil {
		return nil, err
	}
	var v interface{}
	if err := utiljson.Unmarshal(j, &v); err != nil {
		return nil, err
	}
	m, _ := v.(map[string]interface{})
	return m, nil
}

// TestDocsIndex: docs/README.md lists every page under docs/.
func TestDocsIndex(t *testing.T) {
	root := repoRoot(t)
	index, err := readPage(root, "docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, l := range index.links() {
		file, _, _ := strings.Cut(l.target, "#")
		listed[path.Clean(path.Join("docs", file))] = true
	}
	for _, p := range docPages(t, root) {
		if strings.HasPrefix(p.rel, "docs/") && p.rel != "docs/README.md" && !listed[p.rel] {
			t.Errorf("docs/README.md does not list %s", p.rel)
		}
	}
}

// TestConditionsReference: docs/reference/conditions.md lists every reason of the code, with its
// text from hack/reasondoc/reasons.yaml, exactly as `make docs` writes it.
func TestConditionsReference(t *testing.T) {
	if err := reasontable.Check(repoRoot(t)); err != nil {
		if errors.Is(err, reasontable.ErrStale) {
			t.Fatalf("%v: the page differs from what the code and %s make", err, reasontable.DataPath)
		}
		t.Fatal(err)
	}
}
