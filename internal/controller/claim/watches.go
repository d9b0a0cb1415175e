package claim

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// What wakes a claim: its resource, its class, and the Pending claims of a kind when a resource
// or class of that kind becomes usable.

// classReadinessChanged passes the updates of a class whose Ready condition changed status: a
// class turning Ready (its module checked, which happens after the spec change that the generation
// predicate sees) wakes its Pending claims at once rather than at their next PendingResync.
func classReadinessChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, ok1 := e.ObjectOld.(*v1alpha1.InfraClass)
		after, ok2 := e.ObjectNew.(*v1alpha1.InfraClass)
		if !ok1 || !ok2 {
			return false
		}
		return readyStatus(before.Status.Conditions) != readyStatus(after.Status.Conditions)
	}}
}

// readyStatus is the status of the Ready condition, "" when there is none.
func readyStatus(conds []metav1.Condition) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady); c != nil {
		return c.Status
	}
	return ""
}

func (r *Reconciler) claimsForResource(ctx context.Context, obj client.Object) []reconcile.Request {
	res, ok := obj.(*v1alpha1.InfraResource)
	if !ok {
		return nil
	}
	if ref := res.Spec.ClaimRef; ref != nil {
		// Its claim; the claims that read its claim (an output changed); and the claims its claim
		// read (their deletion waits for this resource).
		reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}}
		reqs = append(reqs, r.readers(ctx, shared.UpstreamKey(ref.Namespace, ref.Name))...)
		return append(reqs, readsFrom(res)...)
	}
	if from := readsFrom(res); len(from) > 0 {
		return from
	}
	if res.Labels[v1alpha1.LabelSharedOf] != "" {
		// A shared resource: the claims of its shares (its outputs are their inputs), and, once
		// Available, the Pending claims of its kind.
		reqs := r.claimsOfShares(ctx, res.Name)
		if res.Status.Phase == v1alpha1.ResourceAvailable {
			reqs = append(reqs, r.pendingClaims(ctx, res.Spec.ResourceKind)...)
		}
		return reqs
	}
	if res.Status.Phase != v1alpha1.ResourceAvailable {
		return nil
	}
	return r.pendingClaims(ctx, res.Spec.ResourceKind)
}

// claimsForClass are the Pending claims of the class's kind, and the claims bound to resources of
// the class (labelled with it at provisioning): their status.monthlyCost follows its price.
func (r *Reconciler) claimsForClass(ctx context.Context, obj client.Object) []reconcile.Request {
	class, ok := obj.(*v1alpha1.InfraClass)
	if !ok {
		return nil
	}
	reqs := r.pendingClaims(ctx, class.Spec.ResourceKind)
	list := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClass: v1alpha1.LabelValue(class.Name)}); err != nil {
		return reqs
	}
	for i := range list.Items {
		if ref := list.Items[i].Spec.ClaimRef; ref != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}})
		}
	}
	return reqs
}

// pendingClaims lists the unbound claims of a kind, from the cache.
func (r *Reconciler) pendingClaims(ctx context.Context, kind string) []reconcile.Request {
	claims := &v1alpha1.InfraClaimList{}
	if err := r.List(ctx, claims, client.MatchingFields{shared.IndexClaimKind: kind}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range claims.Items {
		if c := &claims.Items[i]; c.Spec.ResourceName == "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return out
}

// readsFrom are the claims a resource's claim read (AnnotationReadsFrom).
func readsFrom(res *v1alpha1.InfraResource) []reconcile.Request {
	v := res.Annotations[v1alpha1.AnnotationReadsFrom]
	if v == "" {
		return nil
	}
	var out []reconcile.Request
	for _, key := range strings.Split(v, ",") {
		if ns, name, ok := strings.Cut(key, "/"); ok {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return out
}

// readers lists the claims under key in IndexClaimUpstreams (UpstreamKey or NamespaceKey), from the
// cache.
func (r *Reconciler) readers(ctx context.Context, key string) []reconcile.Request {
	claims := &v1alpha1.InfraClaimList{}
	if err := r.List(ctx, claims, client.MatchingFields{shared.IndexClaimUpstreams: key}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(claims.Items))
	for i := range claims.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&claims.Items[i])})
	}
	return out
}

// relatedClaims are the claims that read the claim (their inputs) and those it reads (their
// readBy, and their deletion waiting for it).
func (r *Reconciler) relatedClaims(ctx context.Context, obj client.Object) []reconcile.Request {
	claim, ok := obj.(*v1alpha1.InfraClaim)
	if !ok {
		return nil
	}
	reqs := r.readers(ctx, shared.UpstreamKey(claim.Namespace, claim.Name))
	for _, p := range claim.Spec.ParametersFrom {
		reqs = append(reqs, reconcile.Request{NamespacedName: upstreamKey(claim.Namespace, p)})
	}
	return reqs
}

// claimsForGrant are the claims that read claims of the grant's namespace.
func (r *Reconciler) claimsForGrant(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.readers(ctx, shared.NamespaceKey(obj.GetNamespace()))
}

// claimsOfShares are the claims the shares of shared resource name are bound to, from the cache.
func (r *Reconciler) claimsOfShares(ctx context.Context, name string) []reconcile.Request {
	list := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, list, client.MatchingLabels{v1alpha1.LabelShareOf: v1alpha1.LabelValue(name)}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if ref := list.Items[i].Spec.ClaimRef; ref != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}})
		}
	}
	return reqs
}
