package controller

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
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// namespaceLabels returns the labels of the claim's namespace (from the cache), for the
// allowedNamespaces of classes and resources.
func (r *ClaimReconciler) namespaceLabels(ctx context.Context, claim *v1alpha1.InfraClaim) (map[string]string, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: claim.Namespace}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", claim.Namespace, err)
	}
	return ns.Labels, nil
}

// overLimits says why provisioning the claim from class would exceed the class's limits for the
// claim's namespace ("" when it would not): the resources of the class held by the namespace's
// claims (labelled with the class and the claim's namespace at provisioning) are counted, and
// their storage capacity summed, from the cache.
func (r *ClaimReconciler) overLimits(ctx context.Context, claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass) (string, error) {
	lim := class.Spec.Limits
	if lim == nil || (lim.MaxClaimsPerNamespace == nil && lim.MaxStoragePerNamespace == nil) {
		return "", nil
	}
	held := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, held, client.MatchingLabels{
		v1alpha1.LabelClass: statebackend.LabelValue(class.Name), v1alpha1.LabelClaimNamespace: claim.Namespace,
	}); err != nil {
		return "", err
	}
	if n := lim.MaxClaimsPerNamespace; n != nil && int32(len(held.Items))+1 > *n {
		return fmt.Sprintf("class %s allows %d resources per namespace; namespace %s holds %d", class.Name, *n, claim.Namespace, len(held.Items)), nil
	}
	if limit := lim.MaxStoragePerNamespace; limit != nil {
		total := claim.Spec.Resources.Requests.Storage()
		for i := range held.Items {
			if q, ok := held.Items[i].Spec.Capacity["storage"]; ok {
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
func (r *ClaimReconciler) notOffered(ctx context.Context, res *v1alpha1.InfraResource, ns string, nsLabels map[string]string) (string, error) {
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
