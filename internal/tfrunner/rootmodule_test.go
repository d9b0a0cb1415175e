package tfrunner

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

func TestResolveSource(t *testing.T) {
	cases := []struct {
		reason           string
		in               Module
		source, version  string
		wantErrSubstring string
	}{
		{"a registry source takes the version argument", Module{"example.org/platform/db/aws", "1.2.0"}, "example.org/platform/db/aws", "1.2.0", ""},
		{"a public registry source", Module{"terraform-aws-modules/rds/aws", "6.0.0"}, "terraform-aws-modules/rds/aws", "6.0.0", ""},
		{"a git source is pinned by ref", Module{"git::https://example.org/m.git", "v1.2.0"}, "git::https://example.org/m.git?ref=v1.2.0", "", ""},
		{"the ref goes before the subdirectory", Module{"git::https://example.org/m.git//rook-minio", "v1.2.0"}, "git::https://example.org/m.git//rook-minio?ref=v1.2.0", "", ""},
		{"a git file URL", Module{"git::file:///srv/modules//aws-rds", "v2"}, "git::file:///srv/modules//aws-rds?ref=v2", "", ""},
		{"an explicit ref is kept", Module{"git::https://example.org/m.git?ref=abc123", "v1"}, "git::https://example.org/m.git?ref=abc123", "", ""},
		{"github shorthand", Module{"github.com/org/repo//mod", "v3"}, "github.com/org/repo//mod?ref=v3", "", ""},
		{"a local path has no version", Module{"./modules/x", "v1"}, "./modules/x", "", ""},
		{"a git source without version is refused", Module{"git::https://example.org/m.git", ""}, "", "", "no version"},
		{"a registry source without version is refused", Module{"example.org/platform/db/aws", ""}, "", "", "no version"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			src, ver, err := ResolveSource(tc.in)
			if tc.wantErrSubstring != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSubstring) {
					t.Fatalf("err = %v, want %q", err, tc.wantErrSubstring)
				}
				return
			}
			if err != nil || src != tc.source || ver != tc.version {
				t.Fatalf("got (%q, %q, %v), want (%q, %q)", src, ver, err, tc.source, tc.version)
			}
		})
	}
}

// TestRenderRootQuotesUserStrings renders a module source full of HCL syntax and checks that it
// comes back, parsed, as exactly the same string: user text never becomes HCL source.
func TestRenderRootQuotesUserStrings(t *testing.T) {
	evil := `./m" } resource "x" "y" { a = "${file("/etc/passwd")}%{ if true }`
	src, err := RenderRoot(RootModule{
		Module:    Module{Source: evil},
		Backend:   Backend{Type: "kubernetes", Config: map[string]cty.Value{"secret_suffix": cty.StringVal(`a"b${c}`)}},
		Variables: []string{"name", "password"}, SensitiveVariables: []string{"password"},
		Outputs: []OutputDecl{{Name: "endpoint"}, {Name: "secret", Sensitive: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, "main.tf", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("rendered root does not parse: %s\n%s", diags.Error(), src)
	}
	blocks := f.Body.(*hclsyntax.Body).Blocks
	var modules, resources, outputs, variables int
	for _, b := range blocks {
		switch b.Type {
		case "module":
			modules++
			v, d := b.Body.Attributes["source"].Expr.Value(nil)
			if d.HasErrors() || v.AsString() != evil {
				t.Errorf("module source = %#v (%s), want the input string", v, d.Error())
			}
		case "resource":
			resources++
		case "output":
			outputs++
		case "variable":
			variables++
		}
	}
	if modules != 1 || resources != 0 || outputs != 2 || variables != 2 {
		t.Errorf("blocks: %d modules, %d resources, %d outputs, %d variables; want 1, 0, 2, 2\n%s", modules, resources, outputs, variables, src)
	}
	if !strings.Contains(string(src), "sensitive = true") {
		t.Errorf("sensitive markings missing:\n%s", src)
	}
}

func TestRenderRootRejectsBadNames(t *testing.T) {
	if _, err := RenderRoot(RootModule{Module: Module{Source: "./m"}, Variables: []string{"bad name"}}); err == nil {
		t.Error("a variable name with a space was accepted")
	}
}
