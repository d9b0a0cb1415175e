package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// cliConfigName is the CLI configuration the manager writes in its work directory when none is
// given (TF_CLI_CONFIG_FILE unset).
const cliConfigName = "cli.tfrc"

// ensureCLIConfig sets TF_CLI_CONFIG_FILE in env (a run's base environment) to a file no run can
// write: the one this process was given, else workDir/cli.tfrc, written now with a
// provider_installation block of `direct {}` only. Without it Terraform and OpenTofu read
// ~/.terraformrc or ~/.tofurc and the implied local mirrors under HOME (terraform's "CLI
// Configuration File" documentation), which a run could plant. It returns the file's path.
func ensureCLIConfig(env map[string]string, workDir string) (string, error) {
	if f := env["TF_CLI_CONFIG_FILE"]; f != "" {
		return f, nil
	}
	f := hclwrite.NewEmptyFile()
	f.Body().AppendNewBlock("provider_installation", nil).Body().AppendNewBlock("direct", nil)
	path := filepath.Join(workDir, cliConfigName)
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return "", err
	}
	_ = os.Remove(path) // read-only from an earlier start
	if err := os.WriteFile(path, f.Bytes(), 0o444); err != nil {
		return "", fmt.Errorf("writing the runs' CLI configuration: %w", err)
	}
	env["TF_CLI_CONFIG_FILE"] = path
	return path, nil
}

// cliConfigPaths returns the local directories the CLI configuration at path installs providers
// from (provider_installation's filesystem_mirror paths, and dev_overrides' directories), which
// every run must read. A file that cannot be parsed yields none: Terraform reports it to the run.
func cliConfigPaths(path string) []string {
	p := hclparse.NewParser()
	var file *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		file, diags = p.ParseJSONFile(path)
	} else {
		file, diags = p.ParseHCLFile(path)
	}
	if diags.HasErrors() || file == nil {
		return nil
	}
	top, _, _ := file.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "provider_installation"}}})
	var out []string
	for _, pi := range top.Blocks {
		inner, _, _ := pi.Body.PartialContent(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "filesystem_mirror"}, {Type: "dev_overrides"}}})
		for _, b := range inner.Blocks {
			attrs, _ := b.Body.JustAttributes()
			for name, a := range attrs {
				if b.Type == "filesystem_mirror" && name != "path" {
					continue
				}
				v, d := a.Expr.Value(nil)
				if !d.HasErrors() && v.IsKnown() && !v.IsNull() && v.Type() == cty.String {
					out = append(out, v.AsString())
				}
			}
		}
	}
	return out
}
