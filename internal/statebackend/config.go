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

// maxSuffix keeps "lock-tfstate-default-<suffix>" within the 63 characters of a Lease name label…
// Leases and Secrets accept 253, but the backend also uses the suffix as a label value (63).
const maxSuffix = 63

var (
	invalidChars  = regexp.MustCompile(`[^a-z0-9-]+`)
	trailingDigit = regexp.MustCompile(`-[0-9]+$`)
)

// SuffixFor derives the state Secret suffix of a resource from its name: lowercase, characters other
// than [a-z0-9-] replaced by '-', at most 63 characters (a label value), and never ending in
// "-<digits>", which the backend's chunk reader would misread as the index of a chunk of a larger
// state; such names get an "-s" appended. Names that must be shortened keep a hash of the whole
// name so two resources never share a suffix.
func SuffixFor(resourceName string) string {
	s := strings.Trim(invalidChars.ReplaceAllString(strings.ToLower(resourceName), "-"), "-")
	if s != resourceName || len(s) > maxSuffix-2 {
		sum := sha256.Sum256([]byte(resourceName))
		h := hex.EncodeToString(sum[:])[:8]
		if len(s) > maxSuffix-len(h)-3 {
			s = strings.Trim(s[:maxSuffix-len(h)-3], "-")
		}
		s = s + "-" + h
	}
	if trailingDigit.MatchString(s) {
		s += "-s"
	}
	return s
}

// SecretName is the name of the Secret the backend keeps a workspace's state in.
func SecretName(workspace, suffix string) string { return "tfstate-" + workspace + "-" + suffix }

// LeaseName is the name of the Lease the backend locks a workspace's state with.
func LeaseName(workspace, suffix string) string { return "lock-" + SecretName(workspace, suffix) }
