package provision

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// RenderedForPool is the value of conductor.io/rendered-generation on a pooled resource: its
// variables were rendered for the pool's stand-in claim, not for any claim's generation, so the
// claim that takes it renders them again (the claim reconciler's rerender).
const RenderedForPool = "pool"

// PoolClaim is the stand-in claim a class's pooled resources are rendered for: no name and no
// namespace, the pool's parameters and requests (spec.readyPool).
func PoolClaim(class *v1alpha1.InfraClass) *v1alpha1.InfraClaim {
	claim := &v1alpha1.InfraClaim{}
	claim.Spec.ResourceKind = class.Spec.ResourceKind
	claim.Spec.ClassName = class.Name
	if p := class.Spec.ReadyPool; p != nil {
		claim.Spec.Parameters = p.Parameters
		claim.Spec.Resources.Requests = p.Resources.Requests
	}
	return claim
}

// PooledResourceFromClass builds a resource of the class's ready pool: ResourceFromClass for the
// pool's stand-in claim (PoolClaim) under the name PooledName, with no claimRef, reclaim policy
// Delete (a pooled resource no claim took is destroyed when the pool shrinks; a bind sets the
// class's policy), labelled conductor.io/ready-pool with the class and annotated rendered for the
// pool. It returns ResourceFromClass's *render.Error when a template does not render.
func PooledResourceFromClass(class *v1alpha1.InfraClass) (*v1alpha1.InfraResource, error) {
	res, err := ResourceFromClass(PoolClaim(class), class, PooledName(class))
	if err != nil {
		return nil, err
	}
	res.Spec.ClaimRef = nil
	res.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
	delete(res.Labels, v1alpha1.LabelClaimNamespace)
	delete(res.Labels, v1alpha1.LabelClaimName)
	res.Labels[v1alpha1.LabelReadyPool] = v1alpha1.LabelValue(class.Name)
	res.Annotations[v1alpha1.AnnotationRenderedGeneration] = RenderedForPool
	return res, nil
}

// PooledName is a new name for a pooled resource of the class: the class's name (at most 40
// characters), "-pool-" and 6 random hex characters (a name taken already makes the Create fail
// with AlreadyExists, and the pool reconciler tries again).
func PooledName(class *v1alpha1.InfraClass) string { return randomName(class, "-pool-") }

// randomName is the class's name (at most 40 characters, without a trailing "-" or "."), infix and
// 6 random hex characters.
func randomName(class *v1alpha1.InfraClass, infix string) string {
	prefix := class.Name
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return strings.TrimRight(prefix, "-.") + infix + hex.EncodeToString(b)
}
