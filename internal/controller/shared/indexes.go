package shared

import (
	"context"
	"strings"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Cache indexes.
const (
	// IndexResourceCandidates indexes InfraResources a claim may bind to (CandidateKeys): a claim
	// looks up the free ones of its kind and those naming it, not every resource of its kind —
	// as the PV controller keeps an index of volumes by access modes rather than listing all.
	IndexResourceCandidates = "conductor.io/binding-candidates"
	// IndexClaimKind indexes InfraClaims by spec.resourceKind (claims to retry when a resource frees up).
	IndexClaimKind = "spec.resourceKind"
	// IndexResourceClass indexes InfraResources by spec.classRef.name (resources to tell of a class's
	// new module version).
	IndexResourceClass = "spec.classRef.name"
	// IndexClaimUpstreams indexes InfraClaims by what they read (UpstreamKeys): a claim's change
	// wakes the claims that read it, and a grant's the claims that read its namespace, as the
	// binding index wakes claims when resources change, never by polling.
	IndexClaimUpstreams = "spec.parametersFrom"
	// IndexResourceReadsFrom indexes InfraResources by the claims their claim read
	// (AnnotationReadsFrom, UpstreamKey): deleting a claim waits for the resources that read it.
	IndexResourceReadsFrom = "conductor.io/reads-from"
)

// UpstreamKeys are claim's keys in IndexClaimUpstreams: UpstreamKey of every claim it reads, and
// NamespaceKey of every namespace it reads from.
func UpstreamKeys(claim *v1alpha1.InfraClaim) []string {
	var keys []string
	for _, p := range claim.Spec.ParametersFrom {
		ns := p.UpstreamNamespace(claim.Namespace)
		keys = append(keys, UpstreamKey(ns, p.Claim), NamespaceKey(ns))
	}
	return keys
}

// UpstreamKey is the IndexClaimUpstreams key of the claims that read claim namespace/name.
func UpstreamKey(namespace, name string) string { return namespace + "/" + name }

// NamespaceKey is the IndexClaimUpstreams key of the claims that read a claim of namespace.
func NamespaceKey(namespace string) string { return "namespace:" + namespace }

var indexOnce sync.Map // manager -> error

// SetupIndexes registers the field indexes once per manager.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	v, _ := indexOnce.LoadOrStore(mgr, sync.OnceValue(func() error {
		idx := mgr.GetFieldIndexer()
		if err := idx.IndexField(ctx, &v1alpha1.InfraResource{}, IndexResourceCandidates, func(o client.Object) []string {
			return CandidateKeys(o.(*v1alpha1.InfraResource))
		}); err != nil {
			return err
		}
		if err := idx.IndexField(ctx, &v1alpha1.InfraResource{}, IndexResourceClass, func(o client.Object) []string {
			if ref := o.(*v1alpha1.InfraResource).Spec.ClassRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}); err != nil {
			return err
		}
		if err := idx.IndexField(ctx, &v1alpha1.InfraResource{}, IndexResourceReadsFrom, func(o client.Object) []string {
			if v := o.GetAnnotations()[v1alpha1.AnnotationReadsFrom]; v != "" {
				return strings.Split(v, ",")
			}
			return nil
		}); err != nil {
			return err
		}
		if err := idx.IndexField(ctx, &v1alpha1.InfraClaim{}, IndexClaimUpstreams, func(o client.Object) []string {
			return UpstreamKeys(o.(*v1alpha1.InfraClaim))
		}); err != nil {
			return err
		}
		return idx.IndexField(ctx, &v1alpha1.InfraClaim{}, IndexClaimKind, func(o client.Object) []string {
			return []string{o.(*v1alpha1.InfraClaim).Spec.ResourceKind}
		})
	}))
	return v.(func() error)()
}

// CandidateKeys are resource res's keys in IndexResourceCandidates: FreeKey of its kind when it
// names no claim and is no ready pool's nor shared (it may be Available to any claim of the kind), or
// ClaimKey of the claim its claimRef names (pre-bound or bound to it). A resource bound to a claim
// is no other claim's candidate, so a claim's lookup finds at most the free resources of its kind
// and its own, whatever the number of bound ones.
func CandidateKeys(res *v1alpha1.InfraResource) []string {
	if ref := res.Spec.ClaimRef; ref != nil {
		return []string{ClaimKey(res.Spec.ResourceKind, ref.Namespace, ref.Name)}
	}
	if res.Labels[v1alpha1.LabelReadyPool] != "" || res.Labels[v1alpha1.LabelSharedOf] != "" {
		return nil
	}
	return []string{FreeKey(res.Spec.ResourceKind)}
}

// FreeKey is the IndexResourceCandidates key of the resources of kind that name no claim.
func FreeKey(kind string) string { return "free/" + kind }

// ClaimKey is the IndexResourceCandidates key of the resources of kind that name claim
// namespace/name in their claimRef.
func ClaimKey(kind, namespace, name string) string {
	return "claim/" + kind + "/" + namespace + "/" + name
}
