package claim

// Spend: a class's maxMonthlyCostPerNamespace and a namespace's conductor.io/max-monthly-cost,
// counted from the classes' prices (issue 68). Checked with the class's count and storage limits
// (overLimits), under the same locks.

import (
	"context"
	"fmt"

	"gopkg.in/inf.v0"
	corev1 "k8s.io/api/core/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// namespaceBudget is the namespace's conductor.io/max-monthly-cost: nil when it sets none, and an
// error naming the annotation when its value is not a decimal amount (which refuses every claim
// of the namespace until it is fixed: a budget nobody can read is not no budget).
func namespaceBudget(ns *corev1.Namespace) (*inf.Dec, error) {
	v, ok := ns.Annotations[v1alpha1.AnnotationMaxMonthlyCost]
	if !ok {
		return nil, nil
	}
	d, err := scheduler.ParseAmount(v)
	if err != nil {
		return nil, fmt.Errorf("namespace %s's %s: %v", ns.Name, v1alpha1.AnnotationMaxMonthlyCost, err)
	}
	return d, nil
}

// costOf is the estimated monthly cost of a held resource, from the price of its class (in
// classes, by name); zero for a resource of no class, of a class that is gone, or unpriced: a
// class without a price is free to budgets.
func costOf(res *v1alpha1.InfraResource, classes map[string]*v1alpha1.InfraClass) *inf.Dec {
	if res.Spec.ClassRef == nil || classes[res.Spec.ClassRef.Name] == nil {
		return new(inf.Dec)
	}
	c, err := scheduler.MonthlyCost(classes[res.Spec.ClassRef.Name].Spec.Price, res.Spec.Capacity)
	if c == nil || err != nil {
		return new(inf.Dec)
	}
	return c
}

// overSpend says why holding a resource of class with capacity (the claim's requests, for one to
// provision; an existing resource's capacity, to bind it) would take the
// namespace over a spend limit ("" when it would not): the class's maxMonthlyCostPerNamespace
// over the resources of the class in held, and the namespace's budget over every resource in
// held. held are the resources the namespace's other claims hold (overLimits reads them). A
// budget that does not read, or a class price that does not compute, refuses too, and says so.
func overSpend(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, capacity v1alpha1.Quantities, ns *corev1.Namespace,
	classes map[string]*v1alpha1.InfraClass, held []*v1alpha1.InfraResource) string {
	budget, err := namespaceBudget(ns)
	if err != nil {
		return err.Error()
	}
	var classLimit *inf.Dec
	if lim := class.Spec.Limits; lim != nil && lim.MaxMonthlyCostPerNamespace != nil {
		q := lim.MaxMonthlyCostPerNamespace.DeepCopy()
		classLimit = q.AsDec()
	}
	if budget == nil && classLimit == nil {
		return ""
	}
	own, err := scheduler.MonthlyCost(class.Spec.Price, capacity)
	if err != nil {
		return fmt.Sprintf("class %s: %v", class.Name, err)
	}
	if own == nil {
		if classLimit != nil {
			return fmt.Sprintf("class %s bounds spend per namespace but has no price (spec.price)", class.Name)
		}
		own = new(inf.Dec)
	}
	if own.Sign() == 0 {
		return "" // what costs nothing adds nothing to any spend
	}
	ofClass, all := new(inf.Dec).Set(own), new(inf.Dec).Set(own)
	for _, res := range held {
		c := costOf(res, classes)
		all.Add(all, c)
		if res.Spec.ClassRef != nil && res.Spec.ClassRef.Name == class.Name {
			ofClass.Add(ofClass, c)
		}
	}
	if classLimit != nil && ofClass.Cmp(classLimit) > 0 {
		return fmt.Sprintf("class %s allows %s a month per namespace; with this claim (%s) namespace %s would spend %s",
			class.Name, scheduler.FormatCost(classLimit), scheduler.FormatCost(own), claim.Namespace, scheduler.FormatCost(ofClass))
	}
	if budget != nil && all.Cmp(budget) > 0 {
		return fmt.Sprintf("namespace %s allows %s a month (%s); with this claim (%s) it would spend %s",
			claim.Namespace, scheduler.FormatCost(budget), v1alpha1.AnnotationMaxMonthlyCost, scheduler.FormatCost(own), scheduler.FormatCost(all))
	}
	return ""
}

// overSpendBinding says why binding res, an existing resource, would take the claim's namespace
// over a spend limit (overSpend with the resource's own capacity; "" when it would not, and for a
// resource of no class or of a class that is gone: it costs 0). Callers hold the namespace's lock
// when namespaceWide or the resource's class has limits.
func (c *counting) overSpendBinding(ctx context.Context, res *v1alpha1.InfraResource) (string, error) {
	if res.Spec.ClassRef == nil {
		return "", nil
	}
	class := c.classes[res.Spec.ClassRef.Name]
	if class == nil || !bounded(class, c.ns) {
		return "", nil
	}
	held, err := c.heldBy(ctx)
	if err != nil {
		return "", err
	}
	return overSpend(c.claim, class, res.Spec.Capacity, c.ns, c.classes, held), nil
}
