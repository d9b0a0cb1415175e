package provision

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// The names that tie a claim and its resource together, as the PV controller's: the name of the
// resource a claim provisions, the resource a claim names, whether a pair is bound.

// ResourceName is the name of the resource dynamically provisioned for a claim: the claim's name
// (at most 40 characters) and 5 hex characters of a hash of its UID, so that it is stable across
// reconciles (a retried Create finds the same object) and distinct between claims. When another
// claim's resource has that name (claims of the same name whose hashes share 5 hex characters),
// the claim's resource is named with 12 (ResourceNames).
func ResourceName(claim *v1alpha1.InfraClaim) string { return ResourceNames(claim)[0] }

// ResourceNames are the names a claim's provisioned resource may have, in the order tried: the
// claim's name (at most 40 characters) and 5, then 12, hex characters of a hash of its UID. Each is
// stable across reconciles; the first not taken by another claim's resource is used.
func ResourceNames(claim *v1alpha1.InfraClaim) []string {
	sum := hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte(claim.UID)); return s[:] }())
	prefix := claim.Name
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	prefix = strings.TrimRight(prefix, "-.") + "-"
	return []string{prefix + sum[:5], prefix + sum[:12]}
}

func BoundName(claim *v1alpha1.InfraClaim) string {
	if claim.Spec.ResourceName != "" {
		return claim.Spec.ResourceName
	}
	return claim.Status.ResourceName
}

// IsBoundPair reports whether res and claim are bound to each other, as the PV controller's
// IsVolumeBoundToClaim and its check of pvc.Spec.VolumeName (pv_controller.go, syncBoundClaim):
// the resource's claimRef names the claim with its UID (only a bind writes it), and the claim
// names no other resource (it names this one, or the bind has not written the claim yet). A
// claimRef without a UID is a reservation (pre-binding), not a bind.
func IsBoundPair(res *v1alpha1.InfraResource, claim *v1alpha1.InfraClaim) bool {
	ref := res.Spec.ClaimRef
	return ref != nil && ref.UID != "" && ref.UID == claim.UID && ref.Namespace == claim.Namespace &&
		ref.Name == claim.Name && (claim.Spec.ResourceName == res.Name || claim.Spec.ResourceName == "")
}

// IsConnectionSecretOf reports whether secret is a connection Secret resource res wrote: labelled
// with the resource (putConnectionSecret labels what it writes).
func IsConnectionSecretOf(secret *corev1.Secret, res *v1alpha1.InfraResource) bool {
	return secret.Labels[statebackend.LabelResource] == v1alpha1.LabelValue(res.Name)
}
