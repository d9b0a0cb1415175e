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
		{"an explicit ref that agrees with the version is kept", Module{"git::https://example.org/m.git?ref=v1", "v1"}, "git::https://example.org/m.git?ref=v1", "", ""},
		{"an explicit ref pins without a version", Module{"git::https://example.org/m.git?ref=abc123", ""}, "git::https://example.org/m.git?ref=abc123", "", ""},
		{"a ref and a version that disagree are refused", Module{"git::https://example.org/m.git?ref=abc123", "v1"}, "", "", `pins ?ref=abc123 but the class's version is "v1"`},
		{"a ref after the subdirectory is read", Module{"git::https://example.org/m.git//sub?ref=v2", "v1"}, "", "", "pins ?ref=v2"},
		{"git over ssh shorthand", Module{"git@github.com:org/repo.git//mod", "v4"}, "git@github.com:org/repo.git//mod?ref=v4", "", ""},
		{"bitbucket over git::", Module{"git::https://bitbucket.org/org/repo.git", "v5"}, "git::https://bitbucket.org/org/repo.git?ref=v5", "", ""},
		{"a relative path without ./ is refused, as in Terraform", Module{"modules/db", "v1"}, "", "", "neither a local path"},
		{"gitlab shorthand is git", Module{"gitlab.com/org/repo", "v6"}, "gitlab.com/org/repo?ref=v6", "", ""},
		{"a private registry with a constraint", Module{"registry.example.org/platform/db/aws//modules/replica", "~> 1.2"}, "registry.example.org/platform/db/aws//modules/replica", "~> 1.2", ""},
		{"a registry version that is no constraint is refused", Module{"terraform-aws-modules/rds/aws", "latest"}, "", "", "neither a version nor a version constraint"},
		{"github.com is no registry host", Module{"github.com/org/repo/x", "v1"}, "github.com/org/repo/x?ref=v1", "", ""},
		{"mercurial is pinned by rev", Module{"hg::https://example.org/m", "r7"}, "hg::https://example.org/m?rev=r7", "", ""},
		{"an archive without checksum is refused", Module{"https://example.org/db-1.2.0.tar.gz", "1.2.0"}, "", "", "archive module source \"https://example.org/db-1.2.0.tar.gz\" is not pinned"},
		{"an archive with a checksum is pinned", Module{"https://example.org/db.tgz?checksum=sha256:abc", "1.2.0"}, "https://example.org/db.tgz?checksum=sha256:abc", "", ""},
		{"a forced s3 bucket without checksum is refused", Module{"s3::https://s3.amazonaws.com/bucket/db.zip", "1"}, "", "", "bucket module source"},
		{"an s3 host is a bucket", Module{"bucket.s3.eu-west-1.amazonaws.com/db.zip", "1"}, "", "", "bucket module source"},
		{"a gcs bucket with a checksum is pinned", Module{"gcs::https://www.googleapis.com/storage/v1/b/db.zip?checksum=md5:00", ""}, "gcs::https://www.googleapis.com/storage/v1/b/db.zip?checksum=md5:00", "", ""},
		{"an empty source is refused", Module{"", "v1"}, "", "", "empty"},
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
