package claim_test

import (
	"context"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// pricedAt gives a class a fixed monthly price and, when perGi is not "", a storage price per GiB.
func pricedAt(monthly, perGi string) func(*v1alpha1.InfraClass) {
	return func(c *v1alpha1.InfraClass) {
		c.Spec.Price = &v1alpha1.ClassPrice{}
		if monthly != "" {
			m := resource.MustParse(monthly)
			c.Spec.Price.Monthly = &m
		}
		if perGi != "" {
			c.Spec.Price.PerUnit = []v1alpha1.UnitPrice{{Resource: "storage", Unit: resource.MustParse("1Gi"), Monthly: resource.MustParse(perGi)}}
		}
	}
}

func inZone(zone string) func(*v1alpha1.InfraClass) {
	return func(c *v1alpha1.InfraClass) { c.Spec.Capabilities[v1alpha1.TopologyZone] = zone }
}

func withScheduling(sel v1alpha1.ClassSelection, spread *v1alpha1.ClaimSpread) func(*v1alpha1.InfraClaim) {
	return func(c *v1alpha1.InfraClaim) {
		c.Spec.Scheduling = &v1alpha1.ClaimScheduling{ClassSelection: sel, Spread: spread}
	}
}

// budgetNamespace creates a namespace whose conductor.io/max-monthly-cost is budget.
func budgetNamespace(ctx context.Context, budget string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "budget-",
		Annotations: map[string]string{v1alpha1.AnnotationMaxMonthlyCost: budget}}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func classOf(ctx context.Context, c *v1alpha1.InfraClaim) string {
	got := getClaim(ctx, c)()
	if got.Spec.ResourceName == "" {
		return ""
	}
	return getResource(ctx, got.Spec.ResourceName)().Spec.ClassRef.Name
}

func boundMessage(c *v1alpha1.InfraClaim) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound); cond != nil {
		return cond.Message
	}
	return ""
}

// Issue 68, the scheduler that weighs cost and availability: classes priced by the platform
// team, claims that ask for the cheapest class or spread over zones, spend bounded per namespace.
var _ = Describe("Scheduling by cost and zone", func() {
	var (
		ctx  context.Context
		kind string
		lc   string
	)
	BeforeEach(func() {
		ctx = context.Background()
		kind = uniqueKind()
		lc = strings.ToLower(kind)
	})

	It("a claim that asks for the cheapest class gets it, with its estimated cost, which follows the class's price", func() {
		Expect(k8s.Create(ctx, newClass("fixed-"+lc, kind, true, pricedAt("20", "")))).To(Succeed())
		Expect(k8s.Create(ctx, newClass("per-gi-"+lc, kind, false, pricedAt("", "0.25")))).To(Succeed())
		Expect(k8s.Create(ctx, newClass("unpriced-"+lc, kind, false))).To(Succeed())
		ns := newNamespace(ctx)
		c := newClaim(ns, "db", kind, "10Gi", withScheduling(v1alpha1.ClassSelectionCheapest, nil))
		Expect(asTeam(ctx, ns).Create(ctx, c)).To(Succeed())
		Eventually(getClaim(ctx, c), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(classOf(ctx, c)).To(Equal("per-gi-"+lc), "10Gi at 0.25 a GiB (2.50) is cheaper than the default's 20")
		Eventually(func() string { return getClaim(ctx, c)().Status.MonthlyCost }, timeout).Should(Equal("2.50"))
		Eventually(func() []string { return eventNotes(ctx, getClaim(ctx, c)()) }, timeout).Should(
			ContainElement(ContainSubstring("chose class per-gi-" + lc + "; 2.50 a month")))

		By("the class's price rises: the claim's estimate follows; the resource is not touched")
		res := getResource(ctx, getClaim(ctx, c)().Spec.ResourceName)()
		class := &v1alpha1.InfraClass{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "per-gi-" + lc}, class)).To(Succeed())
		pricedAt("1", "0.30")(class)
		Expect(k8s.Update(ctx, class)).To(Succeed())
		Eventually(func() string { return getClaim(ctx, c)().Status.MonthlyCost }, timeout).Should(Equal("4.00"))
		Expect(getResource(ctx, res.Name)().Generation).To(Equal(res.Generation), "a price is data: nothing is applied")

		By("a claim that names its class is refused Cheapest at admission")
		named := newClaim(ns, "named", kind, "1Gi", withScheduling(v1alpha1.ClassSelectionCheapest, nil), func(c *v1alpha1.InfraClaim) { c.Spec.ClassName = "fixed-" + lc })
		err := asTeam(ctx, ns).Create(ctx, named)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("chooses a class for a claim that names none"))
	})

	It("Cheapest with no priced class of the kind: NoClassFits with the reason each was left out; nothing provisioned", func() {
		Expect(k8s.Create(ctx, newClass("unpriced-"+lc, kind, true))).To(Succeed())
		ns := newNamespace(ctx)
		c := newClaim(ns, "db", kind, "1Gi", withScheduling(v1alpha1.ClassSelectionCheapest, nil))
		Expect(asTeam(ctx, ns).Create(ctx, c)).To(Succeed())
		Eventually(getClaim(ctx, c), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonNoClassFits)))
		Expect(boundMessage(getClaim(ctx, c)())).To(ContainSubstring("unpriced-" + lc + " has no price"))
		list := &v1alpha1.InfraResourceList{}
		Expect(k8s.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClaimNamespace: ns})).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})

	// As counts (tenancy_test's claims created together), spend is read from the API server under
	// the namespace's lock: claims created together cannot all pass a budget only some fit in.
	It("a namespace's budget, claims created together: only what fits is provisioned, the rest SpendLimitReached", func() {
		Expect(k8s.Create(ctx, newClass("four-"+lc, kind, true, pricedAt("4", "")))).To(Succeed())
		ns := budgetNamespace(ctx, "10")
		var claims []*v1alpha1.InfraClaim
		for i := range 6 {
			claims = append(claims, newClaim(ns, "c"+strconv.Itoa(i), kind, "1Gi"))
		}
		team := asTeam(ctx, ns)
		createTogether(ctx, team, claims)
		settled := func() (bound, refused int) { return settledAs(ctx, claims, v1alpha1.ReasonSpendLimitReached) }
		Eventually(func() int { b, r := settled(); return b + r }, timeout).Should(Equal(6))
		bound, refused := settled()
		Expect([]int{bound, refused}).To(Equal([]int{2, 4}), "4 + 4 fit in 10; a third would spend 12")
		for _, c := range claims {
			if got := getClaim(ctx, c)(); got.Status.Phase != v1alpha1.ClaimBound {
				Expect(boundMessage(got)).To(ContainSubstring("namespace " + ns + " allows 10.00 a month"))
				Expect(boundMessage(got)).To(ContainSubstring("it would spend 12.00"))
			}
		}

		By("the budget lowered under what the namespace spends: nothing is deleted or unbound; new claims wait")
		nsObj := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		nsObj.Annotations[v1alpha1.AnnotationMaxMonthlyCost] = "1"
		Expect(k8s.Update(ctx, nsObj)).To(Succeed())
		late := newClaim(ns, "late", kind, "1Gi")
		Expect(team.Create(ctx, late)).To(Succeed())
		Eventually(getClaim(ctx, late), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonSpendLimitReached)))
		Consistently(func() int { b, _ := settled(); return b }, 2*time.Second).Should(Equal(2))

		By("a budget that does not read refuses, and says so")
		Expect(k8s.Get(ctx, client.ObjectKey{Name: ns}, nsObj)).To(Succeed())
		nsObj.Annotations[v1alpha1.AnnotationMaxMonthlyCost] = "lots"
		Expect(k8s.Update(ctx, nsObj)).To(Succeed())
		Eventually(func() string { return boundMessage(getClaim(ctx, late)()) }, timeout).Should(ContainSubstring(`"lots" is not a decimal amount`))
	})

	It("a class's maxMonthlyCostPerNamespace bounds one class's spend, other classes unaffected", func() {
		limit := resource.MustParse("5")
		Expect(k8s.Create(ctx, newClass("capped-"+lc, kind, true, pricedAt("", "1"), func(c *v1alpha1.InfraClass) {
			c.Spec.Limits = &v1alpha1.ClassLimits{MaxMonthlyCostPerNamespace: &limit}
		}))).To(Succeed())
		ns := newNamespace(ctx)
		first := newClaim(ns, "first", kind, "3Gi")
		Expect(asTeam(ctx, ns).Create(ctx, first)).To(Succeed())
		Eventually(getClaim(ctx, first), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		second := newClaim(ns, "second", kind, "3Gi")
		Expect(asTeam(ctx, ns).Create(ctx, second)).To(Succeed())
		Eventually(getClaim(ctx, second), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonSpendLimitReached)))
		Expect(boundMessage(getClaim(ctx, second)())).To(ContainSubstring("class capped-" + lc + " allows 5.00 a month per namespace"))
		fits := newClaim(ns, "fits", kind, "2Gi")
		Expect(asTeam(ctx, ns).Create(ctx, fits)).To(Succeed())
		Eventually(getClaim(ctx, fits), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)), "3 + 2 is the limit, not over it")
	})

	It("claims that spread over zones, created together, are provisioned two in each of three zones", func() {
		for _, z := range []string{"a", "b", "c"} {
			Expect(k8s.Create(ctx, newClass("zone-"+z+"-"+lc, kind, z == "a", inZone(z)))).To(Succeed())
		}
		ns := newNamespace(ctx)
		spread := &v1alpha1.ClaimSpread{TopologyKey: v1alpha1.TopologyZone, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
		var claims []*v1alpha1.InfraClaim
		for i := range 6 {
			claims = append(claims, newClaim(ns, "web"+strconv.Itoa(i), kind, "1Gi", withScheduling(v1alpha1.ClassSelectionDefault, spread),
				func(c *v1alpha1.InfraClaim) { c.Labels = map[string]string{"app": "web"} }))
		}
		// Another group's claim in zone a does not count against this group.
		other := newClaim(ns, "batch", kind, "1Gi")
		Expect(asTeam(ctx, ns).Create(ctx, other)).To(Succeed())
		Eventually(getClaim(ctx, other), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		createTogether(ctx, asTeam(ctx, ns), claims)
		zones := func() map[string]int {
			out := map[string]int{}
			for _, c := range claims {
				if cl := classOf(ctx, c); cl != "" {
					out[strings.TrimSuffix(strings.TrimPrefix(cl, "zone-"), "-"+lc)]++
				}
			}
			return out
		}
		Eventually(zones, timeout).Should(Equal(map[string]int{"a": 2, "b": 2, "c": 2}))
	})

	It("binding an existing priced resource counts against the budget too; a free one binds", func() {
		Expect(k8s.Create(ctx, newClass("dear-"+lc, kind, false, pricedAt("50", "")))).To(Succeed())
		dear := staticResource("dear-"+lc, kind, "10Gi", func(r *v1alpha1.InfraResource) {
			r.Spec.ClassRef = &v1alpha1.ClassReference{Name: "dear-" + lc}
		})
		createAvailable(ctx, dear)
		ns := budgetNamespace(ctx, "20")
		c := newClaim(ns, "db", kind, "5Gi")
		Expect(asTeam(ctx, ns).Create(ctx, c)).To(Succeed())
		Eventually(getClaim(ctx, c), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonSpendLimitReached)))
		Expect(boundMessage(getClaim(ctx, c)())).To(ContainSubstring("with this claim (50.00) it would spend 50.00"))
		Expect(getResource(ctx, dear.Name)().Spec.ClaimRef).To(BeNil())

		// Not createAvailable: the waiting claim may bind it before it is seen Available.
		free := staticResource("free-"+lc, kind, "10Gi")
		Expect(k8s.Create(ctx, free)).To(Succeed())
		Eventually(getClaim(ctx, c), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(getClaim(ctx, c)().Spec.ResourceName).To(Equal(free.Name))
		Expect(getResource(ctx, free.Name)().Labels).To(HaveKeyWithValue(v1alpha1.LabelClaimNamespace, ns), "counted as the namespace's from now on")
	})
})
