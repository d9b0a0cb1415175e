package claim_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
)

// createTogether creates claims at once, each from its own goroutine, with client c.
func createTogether(ctx context.Context, c client.Client, claims []*v1alpha1.InfraClaim) {
	var wg sync.WaitGroup
	for _, claim := range claims {
		wg.Go(func() {
			defer GinkgoRecover()
			Expect(c.Create(ctx, claim)).To(Succeed())
		})
	}
	wg.Wait()
}

// settledAs counts the claims that are Bound, and those Pending for reason.
func settledAs(ctx context.Context, claims []*v1alpha1.InfraClaim, reason string) (bound, refused int) {
	for _, c := range claims {
		got := getClaim(ctx, c)()
		switch {
		case got.Status.Phase == v1alpha1.ClaimBound:
			bound++
		case boundReason(got) == reason:
			refused++
		}
	}
	return bound, refused
}

// labelledNamespace creates a namespace with these labels.
func labelledNamespace(ctx context.Context, labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-", Labels: labels}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// Issue 18: a platform team says which namespaces a class or a resource is for. Claims are made by
// each namespace's team (asTeam: only the infraclaim-editor role).
var _ = Describe("Classes and resources for some namespaces only", func() {
	var (
		ctx  context.Context
		kind string
	)
	BeforeEach(func() {
		ctx = context.Background()
		kind = uniqueKind()
	})
	teamA := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}

	It("a class offered to team a provisions for team a's claims only; others get ClassNotAllowed and nothing", func() {
		Expect(k8s.Create(ctx, newClass("only-a-"+strings.ToLower(kind), kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.AllowedNamespaces = teamA
		}))).To(Succeed())
		a := labelledNamespace(ctx, map[string]string{"team": "a"})
		b := labelledNamespace(ctx, map[string]string{"team": "b"})

		outsider := newClaim(b, "db", kind, "5Gi")
		Expect(asTeam(ctx, outsider.Namespace).Create(ctx, outsider)).To(Succeed())
		Eventually(getClaim(ctx, outsider), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonClassNotAllowed)))
		Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKey{Name: provision.ResourceName(getClaim(ctx, outsider)())}, &v1alpha1.InfraResource{})
		}, 2*time.Second, 200*time.Millisecond).ShouldNot(Succeed(), "nothing is provisioned for a namespace the class is not offered to")

		insider := newClaim(a, "db", kind, "5Gi")
		Expect(asTeam(ctx, insider.Namespace).Create(ctx, insider)).To(Succeed())
		Eventually(getClaim(ctx, insider), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		res := getResource(ctx, getClaim(ctx, insider)().Spec.ResourceName)()
		Expect(res.Spec.AllowedNamespaces).To(Equal(teamA), "the provisioned resource keeps the class's namespaces")
	})

	It("a resource offered to team a is never bound from another namespace, named or matched", func() {
		res := staticResource("for-a-"+strings.ToLower(kind), kind, "10Gi", func(r *v1alpha1.InfraResource) { r.Spec.AllowedNamespaces = teamA })
		createAvailable(ctx, res)
		b := labelledNamespace(ctx, map[string]string{"team": "b"})
		named := newClaim(b, "named", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = res.Name })
		Expect(asTeam(ctx, named.Namespace).Create(ctx, named)).To(Succeed())
		Eventually(getClaim(ctx, named), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonResourceNotAllowed)))
		matched := newClaim(b, "matched", kind, "5Gi")
		Expect(asTeam(ctx, matched.Namespace).Create(ctx, matched)).To(Succeed())
		Eventually(getClaim(ctx, matched), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonNoMatchingResource)))
		Expect(getResource(ctx, res.Name)().Spec.ClaimRef).To(BeNil())

		a := labelledNamespace(ctx, map[string]string{"team": "a"})
		ok := newClaim(a, "db", kind, "5Gi")
		Expect(asTeam(ctx, ok.Namespace).Create(ctx, ok)).To(Succeed())
		Eventually(getClaim(ctx, ok), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(getClaim(ctx, ok)().Spec.ResourceName).To(Equal(res.Name))
	})

	It("a resource of a class offered to team a, with no selector of its own, is never bound from another namespace", func() {
		// Issue 18's known gap: a static resource naming the class (or one provisioned before the
		// field existed) carried no selector, and the class's was not looked at.
		className := "class-a-" + strings.ToLower(kind)
		Expect(k8s.Create(ctx, newClass(className, kind, false, func(c *v1alpha1.InfraClass) { c.Spec.AllowedNamespaces = teamA }))).To(Succeed())
		res := staticResource("of-class-a-"+strings.ToLower(kind), kind, "10Gi", func(r *v1alpha1.InfraResource) {
			r.Spec.ClassRef = &v1alpha1.ClassReference{Name: className}
		})
		createAvailable(ctx, res)
		b := labelledNamespace(ctx, map[string]string{"team": "b"})
		named := newClaim(b, "named", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = res.Name })
		Expect(asTeam(ctx, named.Namespace).Create(ctx, named)).To(Succeed())
		Eventually(getClaim(ctx, named), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonResourceNotAllowed)))
		matched := newClaim(b, "matched", kind, "5Gi")
		Expect(asTeam(ctx, matched.Namespace).Create(ctx, matched)).To(Succeed())
		Eventually(getClaim(ctx, matched), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonNoMatchingResource)))
		Expect(getResource(ctx, res.Name)().Spec.ClaimRef).To(BeNil())

		a := labelledNamespace(ctx, map[string]string{"team": "a"})
		ok := newClaim(a, "db", kind, "5Gi")
		Expect(asTeam(ctx, ok.Namespace).Create(ctx, ok)).To(Succeed())
		Eventually(getClaim(ctx, ok), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(getClaim(ctx, ok)().Spec.ResourceName).To(Equal(res.Name))
	})

	It("a class's limits bound what one namespace provisions from it: ClassLimitReached, and other namespaces unaffected", func() {
		one := int32(1)
		eight := resource.MustParse("8Gi")
		Expect(k8s.Create(ctx, newClass("lim-"+strings.ToLower(kind), kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.Limits = &v1alpha1.ClassLimits{MaxClaimsPerNamespace: &one}
		}))).To(Succeed())
		ns := labelledNamespace(ctx, nil)
		first := newClaim(ns, "first", kind, "5Gi")
		Expect(asTeam(ctx, first.Namespace).Create(ctx, first)).To(Succeed())
		Eventually(getClaim(ctx, first), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		second := newClaim(ns, "second", kind, "5Gi")
		Expect(asTeam(ctx, second.Namespace).Create(ctx, second)).To(Succeed())
		Eventually(getClaim(ctx, second), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonClassLimitReached)))
		other := newClaim(labelledNamespace(ctx, nil), "first", kind, "5Gi")
		Expect(asTeam(ctx, other.Namespace).Create(ctx, other)).To(Succeed())
		Eventually(getClaim(ctx, other), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))

		storageKind := uniqueKind()
		Expect(k8s.Create(ctx, newClass("lim-"+strings.ToLower(storageKind), storageKind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.Limits = &v1alpha1.ClassLimits{MaxStoragePerNamespace: &eight}
		}))).To(Succeed())
		small := newClaim(ns, "small", storageKind, "5Gi")
		Expect(asTeam(ctx, small.Namespace).Create(ctx, small)).To(Succeed())
		Eventually(getClaim(ctx, small), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		over := newClaim(ns, "over", storageKind, "5Gi")
		Expect(asTeam(ctx, over.Namespace).Create(ctx, over)).To(Succeed())
		Eventually(getClaim(ctx, over), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonClassLimitReached)))
		Expect(meta.FindStatusCondition(getClaim(ctx, over)().Status.Conditions, v1alpha1.ConditionBound).Message).To(ContainSubstring("10Gi"))

		// Issue 46: a claim that requests no storage escaped the limit (nothing counted it).
		none := newClaim(ns, "none", storageKind, "1Gi", func(c *v1alpha1.InfraClaim) { c.Spec.Resources.Requests = nil })
		Expect(asTeam(ctx, none.Namespace).Create(ctx, none)).To(Succeed())
		Eventually(getClaim(ctx, none), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonClassLimitReached)))
		Expect(meta.FindStatusCondition(getClaim(ctx, none)().Status.Conditions, v1alpha1.ConditionBound).Message).To(ContainSubstring("must request storage"))
	})

	// Issue 33: limits are checked against the API server under a lock per class and namespace,
	// not against a cache that has not seen the resource provisioned a moment ago.
	It("claims created together over a class's limit: only as many as the limit are provisioned, the rest ClassLimitReached", func() {
		two := int32(2)
		Expect(k8s.Create(ctx, newClass("lim-"+strings.ToLower(kind), kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.Limits = &v1alpha1.ClassLimits{MaxClaimsPerNamespace: &two}
		}))).To(Succeed())
		ns := labelledNamespace(ctx, nil)
		var claims []*v1alpha1.InfraClaim
		for i := range 8 {
			claims = append(claims, newClaim(ns, "c"+strconv.Itoa(i), kind, "1Gi"))
		}
		createTogether(ctx, asTeam(ctx, ns), claims)
		settled := func() (bound, refused int) { return settledAs(ctx, claims, v1alpha1.ReasonClassLimitReached) }
		Eventually(func() int { b, r := settled(); return b + r }, timeout).Should(Equal(8))
		Consistently(func() int {
			list := &v1alpha1.InfraResourceList{}
			Expect(k8s.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClaimNamespace: ns})).To(Succeed())
			return len(list.Items)
		}, 2*time.Second).Should(Equal(2), "resources provisioned for the namespace")
		bound, refused := settled()
		Expect([]int{bound, refused}).To(Equal([]int{2, 6}))
	})

	It("expansion counts against the class's storage limit: refused with ClassLimitReached, the capacity unchanged", func() {
		eight := resource.MustParse("8Gi")
		Expect(k8s.Create(ctx, newClass("lim-"+strings.ToLower(kind), kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.Limits = &v1alpha1.ClassLimits{MaxStoragePerNamespace: &eight}
			c.Spec.AllowExpansion = true
		}))).To(Succeed())
		ns := labelledNamespace(ctx, nil)
		c := newClaim(ns, "grows", kind, "5Gi")
		Expect(asTeam(ctx, ns).Create(ctx, c)).To(Succeed())
		Eventually(getClaim(ctx, c), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Eventually(func() error {
			got := getClaim(ctx, c)()
			got.Spec.Resources.Requests["storage"] = resource.MustParse("10Gi")
			return asTeam(ctx, ns).Update(ctx, got)
		}, timeout).Should(Succeed())
		Eventually(func() string {
			cond := meta.FindStatusCondition(getClaim(ctx, c)().Status.Conditions, v1alpha1.ConditionResized)
			if cond == nil {
				return ""
			}
			return cond.Reason
		}, timeout).Should(Equal(v1alpha1.ReasonClassLimitReached))
		res := &v1alpha1.InfraResource{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: getClaim(ctx, c)().Spec.ResourceName}, res)).To(Succeed())
		capacity := res.Spec.Capacity["storage"]
		Expect(capacity.String()).To(Equal("5Gi"))
	})
})
