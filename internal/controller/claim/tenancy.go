package claim

// Tenancy: which namespaces may use a class or a resource (allowedNamespaces), and how much one
// namespace may provision from a class (limits). Issue 18.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// namespaceLabels returns the labels of the claim's namespace (from the cache), for the
// allowedNamespaces of classes and resources.
func (r *Reconciler) namespaceLabels(ctx context.Context, claim *v1alpha1.InfraClaim) (map[string]string, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: claim.Namespace}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", claim.Namespace, err)
	}
	return ns.Labels, nil
}

// lockLimits takes the lock of class's limits in namespace and returns its release. It serialises
// the check of a class's limits and the write it allows (provisioning a resource, growing one's
// capacity), so that two claims reconciled at once cannot both pass a limit only one of them fits
// in. Only the leader reconciles claims, so a lock in its memory is enough; the counts are read
// from the API server (Reconciler.APIReader), never from a cache that may not hold the
// resource created a moment ago. The locks are k8s.io/utils' hashed key mutex: unrelated keys may
// share a lock, which costs a wait, never a deadlock (no caller holds two).
func (r *Reconciler) lockLimits(class, namespace string) func() {
	key := class + "/" + namespace
	r.limitLocks.LockKey(key)
	return func() { _ = r.limitLocks.UnlockKey(key) }
}

// hasLimits reports whether class bounds what a namespace provisions from it.
func hasLimits(class *v1alpha1.InfraClass) bool {
	lim := class.Spec.Limits
	return lim != nil && (lim.MaxClaimsPerNamespace != nil || lim.MaxStoragePerNamespace != nil)
}

// overLimits says why holding a resource of class with the claim's requests would exceed the
// class's limits for the claim's namespace ("" when it would not). It counts the resources of the
// class held by the namespace's other claims (labelled with the class and the claim's namespace at
// provisioning; a resource pre-bound to this claim is the claim's own and is counted once, as the
// claim) and sums their storage capacity with the claim's request. Callers hold the limit lock of
// the class and namespace (lockLimits) until they wrote what the answer allowed.
func (r *Reconciler) overLimits(ctx context.Context, claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass) (string, error) {
	if !hasLimits(class) {
		return "", nil
	}
	lim := class.Spec.Limits
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	list := &v1alpha1.InfraResourceList{}
	if err := reader.List(ctx, list, client.MatchingLabels{
		v1alpha1.LabelClass: v1alpha1.LabelValue(class.Name), v1alpha1.LabelClaimNamespace: claim.Namespace,
	}); err != nil {
		return "", err
	}
	var held []*v1alpha1.InfraResource
	for i := range list.Items {
		if !scheduler.IsPreBoundTo(&list.Items[i], claim) {
			held = append(held, &list.Items[i])
		}
	}
	if n := lim.MaxClaimsPerNamespace; n != nil && int32(len(held))+1 > *n {
		return fmt.Sprintf("class %s allows %d resources per namespace; namespace %s holds %d", class.Name, *n, claim.Namespace, len(held)), nil
	}
	if limit := lim.MaxStoragePerNamespace; limit != nil {
		if _, ok := claim.Spec.Resources.Requests["storage"]; !ok {
			// As a ResourceQuota on requests.storage refuses a claim that requests none: what
			// the module would make of no request is not counted anywhere.
			return fmt.Sprintf("class %s allows %s of storage per namespace: a claim of it must request storage (resources.requests.storage)",
				class.Name, limit.String()), nil
		}
		total := claim.Spec.Resources.Requests.Storage()
		for _, res := range held {
			if q, ok := res.Spec.Capacity["storage"]; ok {
				total.Add(q)
			}
		}
		if total.Cmp(*limit) > 0 {
			return fmt.Sprintf("class %s allows %s of storage per namespace; with this claim namespace %s would hold %s",
				class.Name, limit.String(), claim.Namespace, total.String()), nil
		}
	}
	return "", nil
}

// notOffered says why a resource named by a claim of namespace ns is not offered to it: its own
// allowedNamespaces, or those of the class it was provisioned from (which also cover resources
// whose own selector is empty), do not select the namespace. It returns "" when the resource is
// offered, and the error of reading the class.
func (r *Reconciler) notOffered(ctx context.Context, res *v1alpha1.InfraResource, ns string, nsLabels map[string]string) (string, error) {
	if !scheduler.AllowsNamespace(res.Spec.AllowedNamespaces, nsLabels) {
		return fmt.Sprintf("resource %s is not offered to namespace %s (its allowedNamespaces)", res.Name, ns), nil
	}
	if res.Spec.ClassRef == nil {
		return "", nil
	}
	class := &v1alpha1.InfraClass{}
	if err := r.Get(ctx, client.ObjectKey{Name: res.Spec.ClassRef.Name}, class); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if !scheduler.AllowsNamespace(class.Spec.AllowedNamespaces, nsLabels) {
		return fmt.Sprintf("resource %s is of class %s, which is not offered to namespace %s (its allowedNamespaces)", res.Name, class.Name, ns), nil
	}
	return "", nil
}
