package claim

// Scheduling by zone and cost (spec.scheduling, issue 68): the load of a claim's spread group,
// and the estimated monthly cost its status shows.

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// spreadOf is the claim's spread, nil when it has none.
func spreadOf(claim *v1alpha1.InfraClaim) *v1alpha1.ClaimSpread {
	if claim.Spec.Scheduling == nil {
		return nil
	}
	return claim.Spec.Scheduling.Spread
}

// spreadLoad counts, by the value of sp's topology key in their capabilities, the resources that
// the namespace's other claims selected by sp.selector hold: those labelled with the namespace
// (provisioned or taken from a pool, read from the API server, so that one provisioned a moment ago
// under the namespace's lock counts) whose claimRef names one of them, and the resources the others
// name in spec.resourceName (static binds, from the cache). It returns a message, and no error,
// when the selector does not parse.
func (r *Reconciler) spreadLoad(ctx context.Context, claim *v1alpha1.InfraClaim, sp *v1alpha1.ClaimSpread) (map[string]int, string, error) {
	sel := labels.Everything()
	if sp.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(sp.Selector)
		if err != nil {
			return nil, fmt.Sprintf("spec.scheduling.spread.selector: %v", err), nil
		}
		sel = s
	}
	claims := &v1alpha1.InfraClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(claim.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, "", err
	}
	group := map[string]string{} // claim name → the resource it names
	for i := range claims.Items {
		if c := &claims.Items[i]; c.UID != claim.UID {
			group[c.Name] = c.Spec.ResourceName
		}
	}
	list := &v1alpha1.InfraResourceList{}
	if err := r.apiReader().List(ctx, list, client.MatchingLabels{v1alpha1.LabelClaimNamespace: claim.Namespace}); err != nil {
		return nil, "", err
	}
	load, counted := map[string]int{}, map[string]bool{}
	count := func(res *v1alpha1.InfraResource) {
		if zone := res.Spec.Capabilities[sp.TopologyKey]; zone != "" && !counted[res.Name] {
			counted[res.Name] = true
			load[zone]++
		}
	}
	for i := range list.Items {
		res := &list.Items[i]
		if ref := res.Spec.ClaimRef; ref != nil && ref.Namespace == claim.Namespace && res.DeletionTimestamp == nil {
			if _, ok := group[ref.Name]; ok {
				count(res)
			}
		}
	}
	for _, name := range group {
		if name == "" || counted[name] {
			continue
		}
		res := &v1alpha1.InfraResource{}
		if err := r.Get(ctx, types.NamespacedName{Name: name}, res); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return nil, "", err
			}
			continue
		}
		count(res)
	}
	return load, "", nil
}

// setCost records the estimated monthly cost of the resource the claim holds (status.monthlyCost):
// its class's price for its capacity, read from the cache at every bound sync so that it follows a
// price change. It is cleared for a resource of no class, of a class that is gone, unpriced, or
// whose price does not compute (the class says PriceInvalid).
func (r *Reconciler) setCost(ctx context.Context, claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) error {
	claim.Status.MonthlyCost = ""
	if res.Spec.ClassRef == nil {
		return nil
	}
	class := &v1alpha1.InfraClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: res.Spec.ClassRef.Name}, class); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cost, err := scheduler.MonthlyCost(class.Spec.Price, res.Spec.Capacity); err == nil {
		claim.Status.MonthlyCost = scheduler.FormatCost(cost)
	}
	return nil
}
