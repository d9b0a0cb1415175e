package statebackend

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// DefaultWorkspace is the Terraform workspace every run uses.
const DefaultWorkspace = "default"

// Config says where the kubernetes backend keeps state.
type Config struct {
	// Namespace holds the state Secrets and lock Leases: the controller's namespace.
	Namespace string
	// KubeconfigPath is the kubeconfig the backend uses; empty with InCluster.
	KubeconfigPath string
	// InCluster makes the backend use the pod's service account.
	InCluster bool
}

// Attributes returns the kubernetes backend block's attributes for the state with this suffix;
// labels, when given, are set on the state Secret by the backend itself.
func (c Config) Attributes(suffix string, labels map[string]string) map[string]cty.Value {
	attrs := map[string]cty.Value{
		"secret_suffix": cty.StringVal(suffix),
		"namespace":     cty.StringVal(c.Namespace),
	}
	if len(labels) > 0 {
		vals := make(map[string]cty.Value, len(labels))
		for k, v := range labels {
			vals[k] = cty.StringVal(v)
		}
		attrs["labels"] = cty.MapVal(vals)
	}
	if c.InCluster {
		attrs["in_cluster_config"] = cty.True
	} else if c.KubeconfigPath != "" {
		attrs["config_path"] = cty.StringVal(c.KubeconfigPath)
	}
	return attrs
}

// maxVerbatim is the longest resource name used as a state suffix unchanged. The backend uses the
// suffix as a label value (63 characters); a kept name leaves room for nothing else.
const maxVerbatim = 63

// hashedPrefix is how much of a changed name a hashed suffix keeps: prefix + "--h" + 16 hex
// characters is 59 characters, within a label value.
const hashedPrefix = 40

// The patterns of SuffixFor: a name kept verbatim (a DNS-1123 label: lower-case alphanumerics and
// '-', alphanumeric at both ends), the runs of characters a changed name replaces, and a trailing
// "-<digits>" a changed name must not end in.
var (
	verbatimName  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	invalidChars  = regexp.MustCompile(`[^a-z0-9]+`)
	trailingDigit = regexp.MustCompile(`-[0-9]+$`)
)

// SuffixFor derives the state Secret suffix of a state name (a resource's name, or the name
// StateNameFor gives it) so that two different names never share a suffix, by construction:
//
//   - a name that is already a suffix the backend handles — a label value of [a-z0-9-], at most
//     63 characters, with no "--" and not ending in "-<digits>" (which the backend's chunk reader
//     would take for the index of a chunk, layout.go) — is its own suffix;
//   - every other name becomes its first 40 characters with each run of characters other than
//     [a-z0-9] replaced by one '-', then "--h" and 16 hex characters of the SHA-256 of the whole
//     name (64 bits).
//
// Kept names never contain "--" and hashed ones always do, so a kept name never equals a hashed
// one; two hashed names are equal only when 64 bits of their SHA-256 are. The result is a valid
// label value and never ends in -<digits>. (Before 2026-11 a name ending in -<digits> got "-s"
// appended, so "x-1" and "x-1-s" shared one state; resources keep the name recorded in
// status.state.secretName, so states written then are still found.)
func SuffixFor(name string) string {
	if len(name) <= maxVerbatim && verbatimName.MatchString(name) && !strings.Contains(name, "--") && !trailingDigit.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	prefix := strings.ToLower(name)
	if len(prefix) > hashedPrefix {
		prefix = prefix[:hashedPrefix]
	}
	prefix = strings.Trim(invalidChars.ReplaceAllString(prefix, "-"), "-")
	if prefix == "" {
		prefix = "state"
	}
	return prefix + "--h" + hex.EncodeToString(sum[:8])
}

// SecretName is the name of the Secret the backend keeps a workspace's state in.
func SecretName(workspace, suffix string) string { return "tfstate-" + workspace + "-" + suffix }

// LeaseName is the name of the Lease the backend locks a workspace's state with.
func LeaseName(workspace, suffix string) string { return "lock-" + SecretName(workspace, suffix) }

// SuffixOf is the suffix of the default workspace's state Secret secretName (as recorded in a
// resource's status.state.secretName): "" when secretName is empty or of another workspace.
func SuffixOf(secretName string) string {
	prefix := SecretName(DefaultWorkspace, "")
	if !strings.HasPrefix(secretName, prefix) {
		return ""
	}
	return strings.TrimPrefix(secretName, prefix)
}
