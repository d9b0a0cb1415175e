package tfrunner

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// ModuleName is the name of the module block that calls the class's module in every root module;
// import addresses and module paths are prefixed with "module.main.".
const ModuleName = "main"

// Module is a module address pinned at a version.
type Module struct {
	// Source is any Terraform module source address.
	Source string
	// Version is a registry version for registry sources, or a git ref for git sources.
	Version string
}

// Backend is a Terraform backend block: its type and its attributes (strings or bools).
type Backend struct {
	Type   string
	Config map[string]cty.Value
}

// OutputDecl is a module output passed through the root module.
type OutputDecl struct {
	Name      string
	Sensitive bool
}

// RootModule is what RenderRoot writes: the module call, the backend and the pass-through outputs.
type RootModule struct {
	Module  Module
	Backend Backend
	// Variables are the names of the input variables the run passes to the module; each becomes a
	// root variable fed from the .tfvars.json file and passed to module "main".
	Variables []string
	// SensitiveVariables are the names among Variables whose values come from Secrets.
	SensitiveVariables []string
	// EphemeralVariables are the names among Variables declared `ephemeral = true` (and
	// sensitive): their values are never written into a plan or a state, and come from the
	// environment (TF_VAR_<name>), not the .tfvars.json file.
	EphemeralVariables []string
	// Outputs are passed through as root outputs of the same name and sensitivity.
	Outputs []OutputDecl
}

// RenderRoot writes the root module as HCL with hclwrite. User-provided values never become HCL
// source text: variable values travel in the .tfvars.json file, and the only user strings written
// here (module source and version, backend attributes) are written as quoted string literals.
// It returns an error when the module address cannot be pinned or a name is not a valid identifier.
func RenderRoot(r RootModule) ([]byte, error) {
	source, ver, err := ResolveSource(r.Module)
	if err != nil {
		return nil, err
	}
	f := hclwrite.NewEmptyFile()
	body := f.Body()

	tf := body.AppendNewBlock("terraform", nil).Body()
	if r.Backend.Type != "" {
		be := tf.AppendNewBlock("backend", []string{r.Backend.Type}).Body()
		for _, k := range slices.Sorted(maps.Keys(r.Backend.Config)) {
			be.SetAttributeValue(k, r.Backend.Config[k])
		}
	}

	sensitive, ephemeral := map[string]bool{}, map[string]bool{}
	for _, v := range r.SensitiveVariables {
		sensitive[v] = true
	}
	for _, v := range r.EphemeralVariables {
		sensitive[v], ephemeral[v] = true, true
	}
	vars := append([]string(nil), r.Variables...)
	sort.Strings(vars)
	for _, v := range vars {
		if !hclsyntax.ValidIdentifier(v) {
			return nil, fmt.Errorf("variable name %q is not a valid identifier", v)
		}
		body.AppendNewline()
		vb := body.AppendNewBlock("variable", []string{v}).Body()
		if sensitive[v] {
			vb.SetAttributeValue("sensitive", cty.True)
		}
		if ephemeral[v] {
			vb.SetAttributeValue("ephemeral", cty.True)
		}
	}

	body.AppendNewline()
	mb := body.AppendNewBlock("module", []string{ModuleName}).Body()
	mb.SetAttributeValue("source", cty.StringVal(source))
	if ver != "" {
		mb.SetAttributeValue("version", cty.StringVal(ver))
	}
	for _, v := range vars {
		mb.SetAttributeTraversal(v, hcl.Traversal{hcl.TraverseRoot{Name: "var"}, hcl.TraverseAttr{Name: v}})
	}

	outs := append([]OutputDecl(nil), r.Outputs...)
	sort.Slice(outs, func(i, j int) bool { return outs[i].Name < outs[j].Name })
	for _, o := range outs {
		if !hclsyntax.ValidIdentifier(o.Name) {
			return nil, fmt.Errorf("output name %q is not a valid identifier", o.Name)
		}
		body.AppendNewline()
		ob := body.AppendNewBlock("output", []string{o.Name}).Body()
		ob.SetAttributeTraversal("value", hcl.Traversal{
			hcl.TraverseRoot{Name: "module"}, hcl.TraverseAttr{Name: ModuleName}, hcl.TraverseAttr{Name: o.Name},
		})
		if o.Sensitive {
			ob.SetAttributeValue("sensitive", cty.True)
		}
	}
	return f.Bytes(), nil
}
