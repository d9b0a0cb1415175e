package claim

// Tenancy: which namespaces may use a class or a resource (allowedNamespaces), and how much one
// namespace may provision from a class (limits). Issue 18.

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// namespaceOf returns the claim's namespace (from the cache): its labels, for the
// allowedNamespaces of classes and resources, and its annotations (its spend budget).
func (r *Reconciler) namespaceOf(ctx context.Context, claim *v1alpha1.InfraClaim) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: claim.Namespace}, ns); err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", claim.Namespace, err)
	}
	return ns, nil
}

// namespaceLabels returns the labels of the claim's namespace (namespaceOf).
func (r *Reconciler) namespaceLabels(ctx context.Context, claim *v1alpha1.InfraClaim) (map[string]string, error) {
	ns, err := r.namespaceOf(ctx, claim)
	if err != nil {
		return nil, err
	}
	return ns.Labels, nil
}

// lockNamespace takes the lock of a namespace's limits and returns its release. It serialises the
// check of what bounds the namespace (a class's limits, its budget, a spread's zones) and the write
// it allows (provisioning a resource, binding one, growing one's capacity), so that two claims
// reconciled at once cannot both pass a limit only one of them fits in, or take the same emptiest
// zone. One key per namespace, whatever the class: a claim that spreads and one that does not, of
// the same class, count its limits under the same lock. Only the leader reconciles claims, so a
// lock in its memory is enough; the counts are read from the API server (Reconciler.APIReader),
// never from a cache that may not hold the resource created a moment ago. The locks are
// k8s.io/utils' hashed key mutex: unrelated namespaces may share a lock, which costs a wait, never
// a deadlock (no caller holds two, and bind releases it before rerender may take it again).
func (r *Reconciler) lockNamespace(namespace string) func() {
	r.limitLocks.LockKey(namespace)
	return func() { _ = r.limitLocks.UnlockKey(namespace) }
}

// lockFor takes the namespace's lock (lockNamespace) when the claim's choice is bounded: its
// namespace has a budget, the claim spreads, or class (nil: not chosen yet) has limits. It returns
// the release (callable more than once; a no-op when nothing was taken).
func (r *Reconciler) lockFor(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, ns *corev1.Namespace) func() {
	if namespaceWide(claim, ns) || (class != nil && hasLimits(class)) {
		return sync.OnceFunc(r.lockNamespace(claim.Namespace))
	}
	return func() {}
}

// namespaceWide reports whether a claim's choice counts across classes: its namespace has a
// budget, or it spreads with the namespace's other claims.
func namespaceWide(claim *v1alpha1.InfraClaim, ns *corev1.Namespace) bool {
	_, budget := ns.Annotations[v1alpha1.AnnotationMaxMonthlyCost]
	return budget || (claim.Spec.Scheduling != nil && claim.Spec.Scheduling.Spread != nil)
}

// hasLimits reports whether class bounds what a namespace provisions from it.
func hasLimits(class *v1alpha1.InfraClass) bool {
	lim := class.Spec.Limits
	return lim != nil && (lim.MaxClaimsPerNamespace != nil || lim.MaxStoragePerNamespace != nil || lim.MaxMonthlyCostPerNamespace != nil)
}

// bounded reports whether holding a resource of class is bounded in the claim's namespace: by the
// class's limits or the namespace's budget.
func bounded(class *v1alpha1.InfraClass, ns *corev1.Namespace) bool {
	_, budget := ns.Annotations[v1alpha1.AnnotationMaxMonthlyCost]
	return budget || hasLimits(class)
}

// overLimits says why holding a resource of class with the claim's requests would exceed the
// class's limits for the claim's namespace, or its spend budget: the reason (ClassLimitReached or
// SpendLimitReached) and message, "" when it would not. It counts the resources held by the
// namespace's other claims (labelled with the claim's namespace at provisioning; a resource
// pre-bound to this claim is the claim's own and is counted once, as the claim): those of the
// class for its count and storage limits, all for spend (overSpend, prices from the cache's
// classes). Callers hold the lock lockFor gives until they wrote what the answer allowed.
// Binding an existing resource is bounded by spend only (overSpendBinding): a class's count and
// storage limits bound what one provisions from it.
func (r *Reconciler) overLimits(ctx context.Context, claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, ns *corev1.Namespace) (string, string, error) {
	if !bounded(class, ns) {
		return "", "", nil
	}
	held, err := r.heldBy(ctx, claim)
	if err != nil {
		return "", "", err
	}
	var ofClass []*v1alpha1.InfraResource
	for _, res := range held {
		if res.Labels[v1alpha1.LabelClass] == v1alpha1.LabelValue(class.Name) {
			ofClass = append(ofClass, res)
		}
	}
	msg := classOver(claim, class, ofClass)
	if msg != "" {
		return v1alpha1.ReasonClassLimitReached, msg, nil
	}
	byName, err := r.classesByName(ctx)
	if err != nil {
		return "", "", err
	}
	if msg := overSpend(claim, class, claim.Spec.Resources.Requests, ns, byName, held); msg != "" {
		return v1alpha1.ReasonSpendLimitReached, msg, nil
	}
	return "", "", nil
}

// heldBy are the resources the claim's namespace's other claims hold: those labelled with the
// namespace (conductor.io/claim-namespace: provisioned for, taken from a pool by, or bound to one
// of its claims), read from the API server, but a resource pre-bound to this claim (the claim's
// own, counted once, as the claim).
func (r *Reconciler) heldBy(ctx context.Context, claim *v1alpha1.InfraClaim) ([]*v1alpha1.InfraResource, error) {
	reader := client.Reader(r.Client)
	if r.APIReader != nil {
		reader = r.APIReader
	}
	list := &v1alpha1.InfraResourceList{}
	if err := reader.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClaimNamespace: claim.Namespace}); err != nil {
		return nil, err
	}
	var held []*v1alpha1.InfraResource
	for i := range list.Items {
		if res := &list.Items[i]; !scheduler.IsPreBoundTo(res, claim) {
			held = append(held, res)
		}
	}
	return held, nil
}

// classesByName are the classes in the cache, by name (their prices).
func (r *Reconciler) classesByName(ctx context.Context) (map[string]*v1alpha1.InfraClass, error) {
	classes := &v1alpha1.InfraClassList{}
	if err := r.List(ctx, classes); err != nil {
		return nil, err
	}
	byName := make(map[string]*v1alpha1.InfraClass, len(classes.Items))
	for i := range classes.Items {
		byName[classes.Items[i].Name] = &classes.Items[i]
	}
	return byName, nil
}

// classOver says why the claim's resource would take the namespace over class's count or storage
// limit, given held, the resources of the class its other claims hold ("" when it would not).
func classOver(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, held []*v1alpha1.InfraResource) string {
	lim := class.Spec.Limits
	if lim == nil {
		return ""
	}
	if n := lim.MaxClaimsPerNamespace; n != nil && int32(len(held))+1 > *n {
		return fmt.Sprintf("class %s allows %d resources per namespace; namespace %s holds %d", class.Name, *n, claim.Namespace, len(held))
	}
	if limit := lim.MaxStoragePerNamespace; limit != nil {
		if _, ok := claim.Spec.Resources.Requests["storage"]; !ok {
			// As a ResourceQuota on requests.storage refuses a claim that requests none: what
			// the module would make of no request is not counted anywhere.
			return fmt.Sprintf("class %s allows %s of storage per namespace: a claim of it must request storage (resources.requests.storage)",
				class.Name, limit.String())
		}
		total := claim.Spec.Resources.Requests.Storage()
		for _, res := range held {
			if q, ok := res.Spec.Capacity["storage"]; ok {
				total.Add(q)
			}
		}
		if total.Cmp(*limit) > 0 {
			return fmt.Sprintf("class %s allows %s of storage per namespace; with this claim namespace %s would hold %s",
				class.Name, limit.String(), claim.Namespace, total.String())
		}
	}
	return ""
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
