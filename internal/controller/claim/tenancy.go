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
// the release (callable more than once; a no-op when nothing was taken) and whether it took it.
func (r *Reconciler) lockFor(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, ns *corev1.Namespace) (func(), bool) {
	if namespaceWide(claim, ns) || (class != nil && hasLimits(class)) {
		return sync.OnceFunc(r.lockNamespace(claim.Namespace)), true
	}
	return func() {}, false
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

// counting is what one reconcile counts a namespace's limits and spend from: the classes (the
// cache's, listed once by the caller) and the resources the namespace's other claims hold (heldBy:
// from the API server, read once, when first needed, under the namespace's lock, which the caller
// holds until it wrote what the answers allowed).
type counting struct {
	r       *Reconciler
	claim   *v1alpha1.InfraClaim
	ns      *corev1.Namespace
	classes map[string]*v1alpha1.InfraClass
	held    []*v1alpha1.InfraResource
	read    bool
}

// newCounting is the counting of claim in namespace ns, with classes (the cache's).
func (r *Reconciler) newCounting(claim *v1alpha1.InfraClaim, ns *corev1.Namespace, classes []v1alpha1.InfraClass) *counting {
	byName := make(map[string]*v1alpha1.InfraClass, len(classes))
	for i := range classes {
		byName[classes[i].Name] = &classes[i]
	}
	return &counting{r: r, claim: claim, ns: ns, classes: byName}
}

// overLimits says why holding a resource of class with the claim's requests would exceed the
// class's limits for the claim's namespace, or its spend budget: the reason (ClassLimitReached or
// SpendLimitReached) and message, "" when it would not. It counts the resources held by the
// namespace's other claims (heldBy): those of the class for its count and storage limits, all for
// spend (overSpend, prices from the classes). Binding an existing resource is bounded by spend
// only (overSpendBinding): a class's count and storage limits bound what one provisions from it.
func (c *counting) overLimits(ctx context.Context, class *v1alpha1.InfraClass) (string, string, error) {
	if !bounded(class, c.ns) {
		return "", "", nil
	}
	held, err := c.heldBy(ctx)
	if err != nil {
		return "", "", err
	}
	var ofClass []*v1alpha1.InfraResource
	for _, res := range held {
		if res.Labels[v1alpha1.LabelClass] == v1alpha1.LabelValue(class.Name) {
			ofClass = append(ofClass, res)
		}
	}
	if msg := classOver(c.claim, class, ofClass); msg != "" {
		return v1alpha1.ReasonClassLimitReached, msg, nil
	}
	if msg := overSpend(c.claim, class, c.claim.Spec.Resources.Requests, c.ns, c.classes, held); msg != "" {
		return v1alpha1.ReasonSpendLimitReached, msg, nil
	}
	return "", "", nil
}

// heldBy are the resources the claim's namespace's other claims hold: those labelled with the
// namespace (conductor.io/claim-namespace: provisioned for, taken from a pool by, or bound to one
// of its claims), read from the API server once, but a resource pre-bound to this claim (the
// claim's own, counted once, as the claim).
func (c *counting) heldBy(ctx context.Context) ([]*v1alpha1.InfraResource, error) {
	if c.read {
		return c.held, nil
	}
	reader := client.Reader(c.r.Client)
	if c.r.APIReader != nil {
		reader = c.r.APIReader
	}
	list := &v1alpha1.InfraResourceList{}
	if err := reader.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClaimNamespace: c.claim.Namespace}); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if res := &list.Items[i]; !scheduler.IsPreBoundTo(res, c.claim) {
			c.held = append(c.held, res)
		}
	}
	c.read = true
	return c.held, nil
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
