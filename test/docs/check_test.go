package docs

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The checks' own pieces, so that a check that passes is known to look.

func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want, reason string }{
		{"State, locks and recovery", "state-locks-and-recovery", "punctuation goes, spaces become hyphens"},
		{"`kubectl conductor`", "kubectl-conductor", "code spans keep their text"},
		{"Install with Helm", "install-with-helm", "lower case"},
		{"Runs get no credentials of the controller's", "runs-get-no-credentials-of-the-controllers", "apostrophes go"},
		{"[Runner pools](runner-pools.md) and scaling", "runner-pools-and-scaling", "a link keeps its text"},
		{"Claim → Bound", "claim--bound", "a symbol goes, both spaces stay"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("%s: slug(%q) = %q, want %q", c.reason, c.heading, got, c.want)
		}
	}
}

func TestParsePage(t *testing.T) {
	p := parsePage("x.md", strings.Join([]string{
		"# Title",
		"See [the guide](docs/guide.md#first-steps) and `make demo`, or `make",
		"bench-scale N=200 [RUNNERS=2]`; not `[code](nowhere.md)`.",
		"",
		"## Title",
		"<!-- docs-check: partial -->",
		"",
		"```yaml",
		"spec: {}",
		"```",
		"- a list item:",
		"  ```sh",
		"  $ make cluster-up && make install   # comment",
		"  ```",
		"| <a id=\"statelocked\"></a>`StateLocked` | … |",
		"[ref]: ../other.md",
	}, "\n"))
	var targets []string
	for _, l := range p.links() {
		targets = append(targets, l.target)
	}
	if want := []string{"docs/guide.md#first-steps", "../other.md"}; !slices.Equal(targets, want) {
		t.Errorf("links = %q, want %q (none inside code)", targets, want)
	}
	var makes []string
	for _, m := range p.makeTargets() {
		makes = append(makes, m.targets...)
	}
	if want := []string{"demo", "bench-scale", "cluster-up", "install"}; !slices.Equal(makes, want) {
		t.Errorf("make targets = %q, want %q", makes, want)
	}
	for _, a := range []string{"title", "title-1", "statelocked"} {
		if !p.anchors[a] {
			t.Errorf("no anchor %q in %v", a, p.anchors)
		}
	}
	if len(p.blocks) != 2 || !p.blocks[0].partial || p.blocks[1].partial || p.blocks[1].lang != "sh" {
		t.Errorf("blocks = %+v, want a partial yaml block and a whole sh block", p.blocks)
	}
	if p.blocks[1].text != "$ make cluster-up && make install   # comment" {
		t.Errorf("an indented block keeps its text without the fence's indent: %q", p.blocks[1].text)
	}
}

func TestMakefileTargets(t *testing.T) {
	got := makefileTargets("X := 1\n.PHONY: a b\na b: c ## doc\nc::\n\techo d:\nIMG ?= x:y\n")
	for _, want := range []string{"a", "b", "c"} {
		if !got[want] {
			t.Errorf("no target %q in %v", want, got)
		}
	}
	for _, not := range []string{"X", "IMG", "echo", "d", ".PHONY"} {
		if got[not] {
			t.Errorf("%q is not a target: %v", not, got)
		}
	}
}

// TestValidationCatches: the CRD validation refuses what the API server refuses.
func TestValidationCatches(t *testing.T) {
	crds, err := loadCRDs(filepath.Join(repoRoot(t), "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	class := crds[schema.GroupVersionKind{Group: "conductor.io", Version: "v1alpha1", Kind: "InfraClass"}]
	if class == nil {
		t.Fatal("no InfraClass CRD")
	}
	for _, c := range []struct {
		reason, yaml, want string
	}{
		{"a valid class", `
apiVersion: conductor.io/v1alpha1
kind: InfraClass
metadata: {name: ok}
spec:
  resourceKind: ObjectStore
  module: {source: ./m, version: v1}
  reclaimPolicy: Retain`, ""},
		{"a required field missing", `
apiVersion: conductor.io/v1alpha1
kind: InfraClass
metadata: {name: x}
spec: {resourceKind: ObjectStore}`, "spec.module: Required value"},
		{"an enum", `
apiVersion: conductor.io/v1alpha1
kind: InfraClass
metadata: {name: x}
spec: {resourceKind: ObjectStore, module: {source: ./m, version: v1}, reclaimPolicy: Keep}`, `spec.reclaimPolicy: Unsupported value: "Keep"`},
		{"an unknown field", `
apiVersion: conductor.io/v1alpha1
kind: InfraClass
metadata: {name: x}
spec: {resourceKind: ObjectStore, module: {source: ./m, version: v1}, reclaim: Delete}`, "spec.reclaim: unknown field"},
		{"a CEL rule", `
apiVersion: conductor.io/v1alpha1
kind: InfraClass
metadata: {name: x}
spec:
  resourceKind: ObjectStore
  module: {source: ./m, version: v1}
  kubernetesAccess: {serviceAccountName: conductor-tf-controller-manager}`, "cannot be granted to runs"},
		{"a namespace on a cluster-scoped kind", `
apiVersion: conductor.io/v1alpha1
kind: InfraClass
metadata: {name: x, namespace: shop}
spec: {resourceKind: ObjectStore, module: {source: ./m, version: v1}}`, "is cluster-scoped"},
		{"a bad name", `
apiVersion: conductor.io/v1alpha1
kind: InfraClass
metadata: {name: Not_A_Name}
spec: {resourceKind: ObjectStore, module: {source: ./m, version: v1}}`, "metadata.name"},
	} {
		obj, err := decodeYAML(c.yaml)
		if err != nil {
			t.Fatalf("%s: %v", c.reason, err)
		}
		problems := strings.Join(class.validate(obj), "\n")
		switch {
		case c.want == "" && problems != "":
			t.Errorf("%s: want no problem, got:\n%s", c.reason, problems)
		case c.want != "" && !strings.Contains(problems, c.want):
			t.Errorf("%s: want a problem with %q, got:\n%s", c.reason, c.want, problems)
		}
	}
	if _, err := decodeYAML("a: 1\na: 2\n"); err == nil {
		t.Error("a duplicate key must not parse")
	}
}
