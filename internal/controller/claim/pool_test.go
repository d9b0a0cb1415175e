package claim_test

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 48 item 1: ready pools. No Terraform here: a resource with no runs is Available once it
// exists, so what is tested is who is provisioned, bound and deleted, and what status says.
var _ = Describe("Ready pools", func() {
	var (
		ctx  context.Context
		ns   string
		kind string
	)
	BeforeEach(func() {
		ctx = context.Background()
		ns = newNamespace(ctx)
		kind = uniqueKind()
	})

	members := func(class string) func() []v1alpha1.InfraResource {
		return func() []v1alpha1.InfraResource {
			list := &v1alpha1.InfraResourceList{}
			Expect(k8s.List(ctx, list, client.MatchingLabels{v1alpha1.LabelReadyPool: v1alpha1.LabelValue(class)})).To(Succeed())
			var out []v1alpha1.InfraResource
			for _, r := range list.Items {
				if r.DeletionTimestamp.IsZero() {
					out = append(out, r)
				}
			}
			return out
		}
	}
	poolStatus := func(class string) func() *v1alpha1.ReadyPoolStatus {
		return func() *v1alpha1.ReadyPoolStatus {
			c := &v1alpha1.InfraClass{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: class}, c)).To(Succeed())
			return c.Status.ReadyPool
		}
	}

	It("keeps the pool full, binds a claim of its requests to a ready member at once and renders it for the claim, and shrinks", func() {
		name := "pool-" + ns
		class := newClass(name, kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain
			c.Spec.Variables = v1alpha1.Variables{
				"name": {Raw: []byte(`"${resource.name}"`)},
				"tier": {Raw: []byte(`"${lookup(claim.spec.parameters, \"tier\", \"none\")}"`)},
			}
			c.Spec.ReadyPool = &v1alpha1.ReadyPool{
				Size:       2,
				Resources:  v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("5Gi")}},
				Parameters: v1alpha1.Variables{"tier": {Raw: []byte(`"small"`)}},
			}
		})
		Expect(k8s.Create(ctx, class)).To(Succeed())
		By("a class that is not Ready gets no pool")
		Consistently(members(name), "2s").Should(BeEmpty())
		markClassReady(ctx, class)

		By("Ready: two members, rendered for the pool, free, Delete until taken; status counts them ready")
		Eventually(members(name), timeout).Should(HaveLen(2))
		for _, m := range members(name)() {
			Expect(m.Spec.ClaimRef).To(BeNil())
			Expect(m.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimDelete))
			Expect(string(m.Spec.Variables["tier"].Raw)).To(Equal(`"small"`))
			Expect(string(m.Spec.Variables["name"].Raw)).To(Equal(`"` + m.Name + `"`))
		}
		Eventually(poolStatus(name), timeout).Should(Equal(&v1alpha1.ReadyPoolStatus{Ready: 2}))
		pooled := map[string]bool{}
		for _, m := range members(name)() {
			pooled[m.Name] = true
		}

		By("a claim of the pool's requests is bound to a member, which is rendered for it (name kept) and takes the class's policy")
		claim := newClaim(ns, "quick", kind, "5Gi", func(c *v1alpha1.InfraClaim) {
			c.Spec.Parameters = v1alpha1.Variables{"tier": {Raw: []byte(`"large"`)}}
		})
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		taken := getClaim(ctx, claim)().Spec.ResourceName
		Expect(pooled).To(HaveKey(taken))
		res := getResource(ctx, taken)()
		Expect(res.Labels).NotTo(HaveKey(v1alpha1.LabelReadyPool))
		Expect(res.Labels).To(HaveKeyWithValue(v1alpha1.LabelClaimNamespace, ns))
		Expect(res.Spec.ClaimRef.UID).To(Equal(getClaim(ctx, claim)().UID))
		Expect(res.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimRetain))
		Eventually(func() string { return string(getResource(ctx, taken)().Spec.Variables["tier"].Raw) }, timeout).Should(Equal(`"large"`))
		Expect(string(getResource(ctx, taken)().Spec.Variables["name"].Raw)).To(Equal(`"` + taken + `"`))
		Eventually(func() []string { return eventReasons(ctx, claim) }, timeout).Should(ContainElement(v1alpha1.ReasonBoundFromPool))

		By("the pool is refilled in the background")
		Eventually(func() int {
			n := 0
			for _, m := range members(name)() {
				if !pooled[m.Name] {
					n++
				}
			}
			return n
		}, timeout).Should(Equal(1))
		Eventually(poolStatus(name), timeout).Should(Equal(&v1alpha1.ReadyPoolStatus{Ready: 2}))

		By("a claim of other requests is provisioned as without a pool")
		other := newClaim(ns, "bigger", kind, "10Gi")
		Expect(k8s.Create(ctx, other)).To(Succeed())
		Eventually(getClaim(ctx, other), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(getClaim(ctx, other)().Spec.ResourceName).To(HavePrefix("bigger-"))

		By("size 0: the free members are deleted, the bound one stays, status.readyPool goes")
		Eventually(func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(class), class); err != nil {
				return err
			}
			class.Spec.ReadyPool.Size = 0
			return k8s.Update(ctx, class)
		}, timeout).Should(Succeed())
		Eventually(members(name), timeout).Should(BeEmpty())
		Eventually(poolStatus(name), timeout).Should(BeNil())
		Expect(getResource(ctx, taken)().DeletionTimestamp).To(BeNil())
	})

	It("never hands a pool member to a claim that names no class, nor to one that names it directly", func() {
		name := "pool-static-" + ns
		class := newClass(name, kind, false, func(c *v1alpha1.InfraClass) {
			c.Spec.ReadyPool = &v1alpha1.ReadyPool{Size: 1, Resources: v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("5Gi")}}}
		})
		Expect(k8s.Create(ctx, class)).To(Succeed())
		markClassReady(ctx, class)
		Eventually(poolStatus(name), timeout).Should(Equal(&v1alpha1.ReadyPoolStatus{Ready: 1}))
		member := members(name)()[0].Name

		// No default class of the kind: the claim may only match Available resources, and the
		// member is not one it may match.
		loose := newClaim(ns, "loose", kind, "5Gi")
		Expect(k8s.Create(ctx, loose)).To(Succeed())
		Eventually(getClaim(ctx, loose), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonNoMatchingResource)))
		named := newClaim(ns, "named", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = member })
		Expect(k8s.Create(ctx, named)).To(Succeed())
		Eventually(getClaim(ctx, named), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonResourceMismatch)))
		Expect(getResource(ctx, member)().Spec.ClaimRef).To(BeNil())
	})
})

// markClassReady sets the class's Ready condition True, as the class reconciler (not run here)
// would once its module resolved; retried on conflicts with the pool reconciler's status writes.
func markClassReady(ctx context.Context, class *v1alpha1.InfraClass) {
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(class), class); err != nil {
			return err
		}
		meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid, Message: "test"})
		return k8s.Status().Update(ctx, class)
	}, timeout).Should(Succeed())
}

// eventReasons are the reasons of the events about obj, of any type.
func eventReasons(ctx context.Context, obj client.Object) []string {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list, client.InNamespace(obj.GetNamespace()))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() && strings.EqualFold(e.Regarding.Kind, "InfraClaim") {
			out = append(out, e.Reason)
		}
	}
	return out
}
