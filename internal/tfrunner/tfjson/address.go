package tfjson

import (
	"slices"
	"strings"
)

// ResourceType splits a managed resource instance address (module path included, e.g.
// module.main.module.inner["a"].random_pet.this[0]) into its module path as addresses write it,
// without keys ("module.main.module.inner.", "" at the root), and its resource type
// ("random_pet"). ok is false for a data source, for an address with fewer than two parts after
// its module path, and for one that does not parse (Terraform's address syntax: keys are numbers
// or quoted strings with escapes).
func ResourceType(address string) (modulePath, typ string, ok bool) {
	parts := addressParts(address)
	for len(parts) >= 2 && parts[0] == "module" {
		modulePath += "module." + parts[1] + "."
		parts = parts[2:]
	}
	if len(parts) < 2 || parts[0] == "data" {
		return "", "", false
	}
	return modulePath, parts[0], true
}

// noRemoteObjectTypes are the resource type prefixes of providers whose objects live only in
// Terraform's state: hashicorp/random, hashicorp/time and hashicorp/tls.
var noRemoteObjectTypes = []string{"random_", "time_", "tls_"}

// noRemoteObjectResources are resource types, named whole, whose objects live only in state:
// Terraform's built-in terraform_data and hashicorp/null's null_resource. Their provisioners do
// touch the world; createInDoubt counts those at provision_start.
var noRemoteObjectResources = []string{"terraform_data", "null_resource"}

// NoRemoteObject reports whether the managed resource at address (module path included, e.g.
// module.main.random_pet.this[0]) is of a type whose objects exist only in Terraform's state
// (noRemoteObjectTypes, noRemoteObjectResources): a create of one that a dead process started is made again without a
// duplicate anywhere. Data sources and addresses that do not parse are not.
func NoRemoteObject(address string) bool {
	_, typ, ok := ResourceType(address)
	if !ok {
		return false
	}
	for _, p := range noRemoteObjectTypes {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return slices.Contains(noRemoteObjectResources, typ)
}

// addressParts splits a resource instance address at the dots outside instance keys, each part
// without its key: module.a["x.y"].random_id.b[0] is module, a, random_id, b. A key is a number or
// a quoted string with escapes (Terraform's address syntax); an address that does not close its
// keys or quotes gives nil.
func addressParts(address string) []string {
	var parts []string
	var part strings.Builder
	depth, quoted, escaped := 0, false, false
	for _, c := range address {
		switch {
		case quoted && escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case quoted && c == '"':
			quoted = false
		case quoted:
		case c == '"' && depth > 0:
			quoted = true
		case c == '[':
			depth++
		case c == ']' && depth > 0:
			depth--
		case depth > 0:
		case c == '.':
			parts = append(parts, part.String())
			part.Reset()
		default:
			part.WriteRune(c)
		}
	}
	if depth != 0 || quoted {
		return nil
	}
	return append(parts, part.String())
}
