package tfrunner

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/terraform-config-inspect/tfconfig"
	"github.com/zclconf/go-cty/cty"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// Input is an input variable a module declares.
type Input struct {
	Name string
	// TypeExpr is the type constraint as written ("string", "map(number)"); empty means any.
	TypeExpr string
	// Type is TypeExpr parsed with hcl's typeexpr (TypeConstraintWithDefaults, as Terraform ≥ 1.3
	// reads variable types); cty.DynamicPseudoType when any. Object attributes declared
	// optional(T) or optional(T, default) are optional attributes of it.
	Type cty.Type
	// Defaults are the defaults of TypeExpr's optional(T, default) attributes, nil when it has none;
	// Defaults.Apply fills them into a value before it is converted to Type, as Terraform does.
	Defaults  *typeexpr.Defaults
	Required  bool
	Sensitive bool
	// Ephemeral is the variable's `ephemeral = true`: its value is never written into a plan or a
	// state (only such a variable may receive Spec.EphemeralVariables).
	Ephemeral   bool
	Description string
}

// ModuleOutput is an output a module declares.
type ModuleOutput struct {
	Name        string
	Sensitive   bool
	Description string
}

// ModuleSchema is what a module declares: its inputs and outputs, sorted by name.
type ModuleSchema struct {
	Inputs  []Input
	Outputs []ModuleOutput
	// Version is the exact version init installed, for a registry source (whose class version may
	// be a constraint); empty for other sources.
	Version string
}

// Input returns the input named name.
func (s *ModuleSchema) Input(name string) (Input, bool) {
	for _, in := range s.Inputs {
		if in.Name == name {
			return in, true
		}
	}
	return Input{}, false
}

// LoadModuleSchema reads the variable and output blocks of the module in dir with
// terraform-config-inspect (hcl/v2), and parses each type constraint with every construct Terraform
// accepts, optional(T, default) included. It returns an error when the module has error
// diagnostics or a type constraint does not parse.
func LoadModuleSchema(dir string) (*ModuleSchema, error) {
	mod, diags := tfconfig.LoadModule(dir)
	if diags.HasErrors() {
		return nil, fmt.Errorf("reading module %s: %w", dir, diags.Err())
	}
	ephemeral, err := ephemeralInputs(dir)
	if err != nil {
		return nil, err
	}
	s := &ModuleSchema{}
	for _, v := range mod.Variables {
		ty := cty.DynamicPseudoType
		var defaults *typeexpr.Defaults
		if v.Type != "" {
			expr, d := hclsyntax.ParseExpression([]byte(v.Type), v.Pos.Filename, hcl.InitialPos)
			if d.HasErrors() {
				return nil, fmt.Errorf("variable %q: type %q: %s", v.Name, v.Type, d.Error())
			}
			t, defs, d := typeexpr.TypeConstraintWithDefaults(expr)
			if d.HasErrors() {
				return nil, fmt.Errorf("variable %q: type %q: %s", v.Name, v.Type, d.Error())
			}
			ty, defaults = t, defs
		}
		s.Inputs = append(s.Inputs, Input{
			Name: v.Name, TypeExpr: v.Type, Type: ty, Defaults: defaults,
			Required: v.Required, Sensitive: v.Sensitive, Ephemeral: ephemeral[v.Name], Description: v.Description,
		})
	}
	for _, o := range mod.Outputs {
		s.Outputs = append(s.Outputs, ModuleOutput{Name: o.Name, Sensitive: o.Sensitive, Description: o.Description})
	}
	sort.Slice(s.Inputs, func(i, j int) bool { return s.Inputs[i].Name < s.Inputs[j].Name })
	sort.Slice(s.Outputs, func(i, j int) bool { return s.Outputs[i].Name < s.Outputs[j].Name })
	return s, nil
}

// loadSchema finds module "main" through init's modules manifest and reads its schema.
func (w *Workspace) loadSchema() (*ModuleSchema, error) {
	dir, version, err := installedModule(w.dir)
	if err != nil {
		return nil, err
	}
	s, err := LoadModuleSchema(dir)
	if err == nil {
		s.Version = version
	}
	return s, err
}

// InstalledModuleDir returns the directory where init installed module "main" of the root module in
// workDir, read from .terraform/modules/modules.json. It returns an error before init.
func InstalledModuleDir(workDir string) (string, error) {
	dir, _, err := installedModule(workDir)
	return dir, err
}

// installedModule returns module "main"'s directory and, for a registry source, the exact version
// init chose (Terraform's modules.json manifest: Key, Dir, Version).
func installedModule(workDir string) (dir, version string, err error) {
	data, err := wsfs.ReadInit(workDir, filepath.Join("modules", "modules.json"))
	if err != nil {
		return "", "", fmt.Errorf("module manifest: %w", err)
	}
	var manifest struct {
		Modules []struct{ Key, Dir, Version string }
	}
	if err := json.Unmarshal(data, &manifest); err != nil {
		return "", "", fmt.Errorf("module manifest: %w", err)
	}
	for _, m := range manifest.Modules {
		if m.Key == ModuleName {
			if filepath.IsAbs(m.Dir) {
				return m.Dir, m.Version, nil
			}
			return filepath.Join(workDir, m.Dir), m.Version, nil
		}
	}
	return "", "", fmt.Errorf("module %q is not installed in %s", ModuleName, workDir)
}
