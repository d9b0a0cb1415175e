package tfrunner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
)

// Ephemeral input variables: the values a run passes without their being written into a plan or a
// state (Spec.EphemeralVariables, the controller's generated passwords).

// ephemeralInputs returns the names of the input variables the module in dir declares with
// `ephemeral = true` (Terraform ≥ 1.10, OpenTofu ≥ 1.11), read with hcl/v2 from its .tf and
// .tf.json files (and OpenTofu's .tofu and .tofu.json) — terraform-config-inspect does not report
// the attribute. It returns an error when a file does not parse or an ephemeral attribute is not a
// constant bool, as Terraform would refuse the module.
func ephemeralInputs(dir string) (map[string]bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading module %s: %w", dir, err)
	}
	p := hclparse.NewParser()
	out := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") {
			continue
		}
		var f *hcl.File
		var diags hcl.Diagnostics
		switch path := filepath.Join(dir, name); {
		case strings.HasSuffix(name, ".tf"), strings.HasSuffix(name, ".tofu"):
			f, diags = p.ParseHCLFile(path)
		case strings.HasSuffix(name, ".tf.json"), strings.HasSuffix(name, ".tofu.json"):
			f, diags = p.ParseJSONFile(path)
		default:
			continue
		}
		if diags.HasErrors() {
			return nil, fmt.Errorf("reading module %s: %s", dir, diags.Error())
		}
		if err := fileEphemeralInputs(f, out); err != nil {
			return nil, fmt.Errorf("reading module %s: %w", dir, err)
		}
	}
	return out, nil
}

var (
	variableBlocks = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "variable", LabelNames: []string{"name"}}}}
	ephemeralAttr  = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "ephemeral"}}}
)

// fileEphemeralInputs adds the variables of f declared ephemeral to out.
func fileEphemeralInputs(f *hcl.File, out map[string]bool) error {
	content, _, diags := f.Body.PartialContent(variableBlocks)
	if diags.HasErrors() {
		return diags
	}
	for _, b := range content.Blocks {
		vc, _, diags := b.Body.PartialContent(ephemeralAttr)
		if diags.HasErrors() {
			return diags
		}
		attr, ok := vc.Attributes["ephemeral"]
		if !ok {
			continue
		}
		v, diags := attr.Expr.Value(nil)
		if diags.HasErrors() || v.Type() != cty.Bool || v.IsNull() {
			return fmt.Errorf("variable %q: ephemeral must be true or false", b.Labels[0])
		}
		if v.True() {
			out[b.Labels[0]] = true
		}
	}
	return nil
}
