package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LabelValue turns a name (an object name: up to 253 characters of a DNS subdomain) into a label
// value (at most 63 characters of [A-Za-z0-9._-], beginning and ending alphanumeric; Kubernetes'
// IsValidLabelValue). A name that already is one is returned unchanged; a longer one keeps its
// first 52 characters and gains "-" and 10 hex digits of the SHA-256 of the whole name, so two
// names never share a value. Every label that names a claim, class or resource goes through it.
func LabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	prefix := name
	if len(prefix) > 52 {
		prefix = prefix[:52]
	}
	prefix = strings.TrimRight(prefix, "-._")
	return prefix + "-" + hex.EncodeToString(sum[:])[:10]
}
