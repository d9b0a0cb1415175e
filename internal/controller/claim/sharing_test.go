package claim_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
)

// sharingGrace is the suite's grace before a shared resource with no share is deleted.
const sharingGrace = 2 * time.Second

// sharingClass is a class whose claims share resources, maxClaims each, with a per-claim module
// that reads the shared resource's endpoint and admin key.
func sharingClass(name, kind string, maxClaims int32) *v1alpha1.InfraClass {
	return newClass(name, kind, true, func(c *v1alpha1.InfraClass) {
		c.Spec.ReclaimPolicy = v1alpha1.ReclaimDelete
		c.Spec.Variables = v1alpha1.Variables{"name": {Raw: []byte(`"${resource.name}"`)}, "node_count": {Raw: []byte(`2`)}}
		c.Spec.Sharing = &v1alpha1.ClassSharing{MaxClaims: maxClaims, PerClaim: v1alpha1.PerClaimModule{
			Module:        v1alpha1.ModuleSource{Source: "git::https://example.org/modules.git//db-user", Version: "v1.0.0"},
			Variables:     v1alpha1.Variables{"database": {Raw: []byte(`"${claim.namespace}-${claim.name}"`)}},
			SharedOutputs: []v1alpha1.SharedOutput{{Output: "endpoint", Variable: "endpoint"}, {Output: "password", Variable: "admin_password"}},
		}}
	})
}

// reclaimShare waits for the share a deleted claim was bound to to be Released, then deletes it as
// its reclaim (Delete) would: this suite runs no Terraform, so nothing destroys it.
func reclaimShare(ctx context.Context, name string) {
	Eventually(getResource(ctx, name), timeout).Should(WithTransform(resourcePhase, Equal(v1alpha1.ResourceReleased)))
	Expect(k8s.Delete(ctx, getResource(ctx, name)())).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: name}, &v1alpha1.InfraResource{}))
	}, timeout).Should(BeTrue())
}

// sharesOfClass lists the class's shared resources and shares, grouped.
func sharesOfClass(ctx context.Context, class string) []scheduler.Shared {
	list := &v1alpha1.InfraResourceList{}
	Expect(k8s.List(ctx, list, client.MatchingLabels{v1alpha1.LabelClass: class})).To(Succeed())
	return scheduler.GroupShares(list.Items)
}

var _ = Describe("Shared resources (a class's spec.sharing)", func() {
	var (
		ctx  context.Context
		kind string
	)
	BeforeEach(func() {
		ctx = context.Background()
		kind = uniqueKind()
	})

	It("claims of two namespaces created together get places in shared resources, never more than maxClaims in one; each its own share", func() {
		class := sharingClass("share-"+kind[4:], kind, 2)
		Expect(k8s.Create(ctx, class)).To(Succeed())
		a, b := newNamespace(ctx), newNamespace(ctx)
		var claims []*v1alpha1.InfraClaim
		for i := range 5 {
			ns := a
			if i%2 == 1 {
				ns = b
			}
			claims = append(claims, newClaim(ns, fmt.Sprintf("db-%d", i), kind, "1Gi"))
		}
		createTogether(ctx, k8s, claims)
		Eventually(func() int { bound, _ := settledAs(ctx, claims, ""); return bound }, timeout).Should(Equal(5))

		groups := sharesOfClass(ctx, class.Name)
		places := 0
		for _, g := range groups {
			Expect(len(g.Taken)).To(BeNumerically("<=", 2), "shared resource %s holds %v", g.Resource.Name, g.Taken)
			Expect(g.Resource.Spec.ClaimRef).To(BeNil(), "a shared resource is no claim's")
			Expect(g.Resource.Spec.WriteConnectionSecretToRef).To(Equal(&v1alpha1.SecretReference{Namespace: "default", Name: g.Resource.Name}))
			places += len(g.Taken)
		}
		Expect(places).To(Equal(5))
		Expect(groups).To(HaveLen(3), "claims packed: 5 claims of 2 places each in 3 shared resources")

		seen := map[string]bool{}
		for _, c := range claims {
			got := getClaim(ctx, c)()
			share := getResource(ctx, got.Spec.ResourceName)()
			Expect(seen[share.Name]).To(BeFalse(), "a share is one claim's")
			seen[share.Name] = true
			of := share.Labels[v1alpha1.LabelShareOf]
			Expect(of).NotTo(BeEmpty())
			n, ok := scheduler.PlaceOf(of, share.Name)
			Expect(ok && n < 2).To(BeTrue(), "share %s takes a place of %s", share.Name, of)
			Expect(share.Spec.Module.Source).To(HaveSuffix("//db-user"), "a share runs the per-claim module")
			Expect(share.Spec.ClaimRef.UID).To(Equal(got.UID))
			Expect(string(share.Spec.Variables["database"].Raw)).To(Equal(fmt.Sprintf("%q", c.Namespace+"-"+c.Name)))
			Expect(share.Spec.VariablesFrom).To(ConsistOf(
				v1alpha1.SecretInput{Name: "endpoint", SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: "default", Name: of, Key: "endpoint"}},
				v1alpha1.SecretInput{Name: "admin_password", SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: "default", Name: of, Key: "password"}}))
		}

		By("a claim naming a shared resource is refused: it is no claim's")
		named := newClaim(a, "takes-shared", kind, "1Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = groups[0].Resource.Name })
		Expect(k8s.Create(ctx, named)).To(Succeed())
		Eventually(getClaim(ctx, named), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonResourceMismatch)))
	})

	It("reclaims a shared resource once its last share is gone, not before; one deleted by hand waits for its shares", func() {
		class := sharingClass("reclaim-"+kind[4:], kind, 3)
		Expect(k8s.Create(ctx, class)).To(Succeed())
		ns := newNamespace(ctx)
		first, second := newClaim(ns, "one", kind, "1Gi"), newClaim(ns, "two", kind, "1Gi")
		Expect(k8s.Create(ctx, first)).To(Succeed())
		Eventually(getClaim(ctx, first), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(k8s.Create(ctx, second)).To(Succeed())
		Eventually(getClaim(ctx, second), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		groups := sharesOfClass(ctx, class.Name)
		Expect(groups).To(HaveLen(1))
		sharedName := groups[0].Resource.Name
		Expect(groups[0].Taken).To(ConsistOf(0, 1))

		By("deleting the shared resource by hand: it waits while shares exist")
		Expect(k8s.Delete(ctx, getResource(ctx, sharedName)())).To(Succeed())
		Eventually(func() string {
			c := meta.FindStatusCondition(getResource(ctx, sharedName)().Status.Conditions, v1alpha1.ConditionReady)
			if c == nil {
				return ""
			}
			return c.Reason
		}, timeout).Should(Equal(v1alpha1.ReasonSharedInUse))
		Expect(phaseOf(getClaim(ctx, first)())).To(Equal(v1alpha1.ClaimBound))

		By("the first claim deleted: its share goes, the shared resource stays for the second")
		firstShare := getClaim(ctx, first)().Spec.ResourceName
		Expect(k8s.Delete(ctx, first)).To(Succeed())
		reclaimShare(ctx, firstShare)
		Consistently(func() error { return k8s.Get(ctx, client.ObjectKey{Name: sharedName}, &v1alpha1.InfraResource{}) }, 2*sharingGrace, 250*time.Millisecond).Should(Succeed())

		By("the last claim deleted: the shared resource is reclaimed")
		secondShare := getClaim(ctx, second)().Spec.ResourceName
		Expect(k8s.Delete(ctx, second)).To(Succeed())
		reclaimShare(ctx, secondShare)
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: sharedName}, &v1alpha1.InfraResource{}))
		}, timeout).Should(BeTrue())
	})

	It("admission refuses a sharing class with a ready pool or discovery, or with maxClaims out of 1..100", func() {
		for name, mutate := range map[string]func(*v1alpha1.InfraClass){
			"pool":      func(c *v1alpha1.InfraClass) { c.Spec.ReadyPool = &v1alpha1.ReadyPool{Size: 1} },
			"discovery": func(c *v1alpha1.InfraClass) { c.Spec.Discovery = &v1alpha1.ClassDiscovery{Module: c.Spec.Module} },
			"zero":      func(c *v1alpha1.InfraClass) { c.Spec.Sharing.MaxClaims = 0 },
			"many":      func(c *v1alpha1.InfraClass) { c.Spec.Sharing.MaxClaims = 101 },
		} {
			class := sharingClass("refused-"+name+"-"+kind[4:], kind, 2)
			mutate(class)
			err := k8s.Create(ctx, class)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
		}
		Expect(k8s.Create(ctx, sharingClass("accepted-"+kind[4:], kind, 100))).To(Succeed())
	})

	It("an emptied shared resource not deleted by hand is reclaimed by the sharing reconciler after the grace", func() {
		class := sharingClass("idle-"+kind[4:], kind, 2)
		Expect(k8s.Create(ctx, class)).To(Succeed())
		ns := newNamespace(ctx)
		claim := newClaim(ns, "only", kind, "1Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		sharedName := sharesOfClass(ctx, class.Name)[0].Resource.Name
		share := getClaim(ctx, claim)().Spec.ResourceName
		Expect(k8s.Delete(ctx, claim)).To(Succeed())
		reclaimShare(ctx, share)
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: sharedName}, &v1alpha1.InfraResource{}))
		}, timeout).Should(BeTrue())
	})
})
