package tfrunner

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/terraform-config-inspect/tfconfig"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// stateOnlySources are the providers whose objects live only in Terraform's state, as
// namespace/type: what "hashicorp/<type>" means on registry.terraform.io and registry.opentofu.org,
// the hosts a source without one resolves to in Terraform and OpenTofu.
var stateOnlySources = map[string]bool{"hashicorp/random": true, "hashicorp/time": true, "hashicorp/tls": true, "hashicorp/null": true}

// stateOnlyTypes are, by module path as addresses write it ("module.main." or
// "module.main.module.inner."), the resource types that module's resources get from a provider
// of stateOnlySources, or from Terraform's built-in provider (terraform_data).
type stateOnlyTypes map[string]map[string]bool

// readStateOnlyTypes reads every module init installed in workDir (.terraform/modules/modules.json,
// each with terraform-config-inspect): a resource type is state-only in a module when the local
// provider name its resources use (their provider argument, or the type's prefix) stands, in that
// module's required_providers, for a source of stateOnlySources, or is not declared there (the
// implied hashicorp/<name>). A module that does not parse has none. It fails when the manifest
// cannot be read.
func readStateOnlyTypes(workDir string) (stateOnlyTypes, error) {
	data, err := wsfs.ReadInit(workDir, filepath.Join("modules", "modules.json"))
	if err != nil {
		return nil, fmt.Errorf("module manifest: %w", err)
	}
	var manifest struct{ Modules []struct{ Key, Dir string } }
	if err := json.Unmarshal(data, &manifest); err != nil {
		return nil, fmt.Errorf("module manifest: %w", err)
	}
	out := stateOnlyTypes{}
	for _, m := range manifest.Modules {
		if m.Key == "" {
			continue // the root module: the workspace's own main.tf declares no resources
		}
		dir := m.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(workDir, dir)
		}
		mod, diags := tfconfig.LoadModule(dir)
		if diags.HasErrors() {
			continue
		}
		// A type is state-only in the module only when every resource of it is: one resource of
		// the type served by another provider (provider = other) makes the type's address rule
		// unsafe for all of them.
		types := map[string]bool{}
		for _, r := range mod.ManagedResources {
			only, seen := types[r.Type]
			types[r.Type] = stateOnlyProvider(mod, r) && (only || !seen)
		}
		out["module."+strings.ReplaceAll(m.Key, ".", ".module.")+"."] = types
	}
	return out, nil
}

// stateOnlyProvider reports whether resource r of mod is served by a provider of stateOnlySources
// or by Terraform's built-in one.
func stateOnlyProvider(mod *tfconfig.Module, r *tfconfig.Resource) bool {
	name := r.Provider.Name
	if name == "" {
		name, _, _ = strings.Cut(r.Type, "_")
	}
	if name == "terraform" {
		return r.Type == "terraform_data"
	}
	source := "hashicorp/" + name
	if req, ok := mod.RequiredProviders[name]; ok && req.Source != "" {
		source = strings.ToLower(req.Source)
		for _, host := range []string{"registry.terraform.io/", "registry.opentofu.org/"} {
			source = strings.TrimPrefix(source, host)
		}
	}
	return stateOnlySources[source]
}

// has reports whether the resource at address (module path included) is of a type its module
// gets from a state-only provider. Addresses outside the modules read, of data sources, or that
// do not parse are not.
func (t stateOnlyTypes) has(address string) bool {
	prefix, typ, ok := tfjson.ResourceType(address)
	return ok && t[prefix][typ]
}
