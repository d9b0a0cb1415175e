package claim_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 48 item 2: lifetimes.
var _ = Describe("Claim lifetimes", func() {
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

	It("says ahead that a short lifetime ends, then deletes the claim and reclaims its resource", func() {
		Expect(k8s.Create(ctx, newClass("life-"+ns, kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain
		}))).To(Succeed())
		claim := newClaim(ns, "short", kind, "5Gi", func(c *v1alpha1.InfraClaim) {
			c.Spec.Lifetime = &metav1.Duration{Duration: 8 * time.Second}
		})
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		got := getClaim(ctx, claim)()
		resName := got.Spec.ResourceName

		By("within the notice (1h by default): LifetimeEnding and a Warning event, expiresAt = creation + 8s")
		Eventually(func() bool {
			return meta.IsStatusConditionTrue(getClaim(ctx, claim)().Status.Conditions, v1alpha1.ConditionLifetimeEnding)
		}, timeout).Should(BeTrue())
		got = getClaim(ctx, claim)()
		Expect(got.Status.ExpiresAt).NotTo(BeNil())
		Expect(got.Status.ExpiresAt.Sub(got.CreationTimestamp.Time)).To(Equal(8 * time.Second))
		Eventually(func() []string { return warningReasons(ctx, got) }, timeout).Should(ContainElement(v1alpha1.ReasonLifetimeEnding))

		By("at the end: an Expired event, the claim deleted, its resource Released by the Retain policy")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(claim), &v1alpha1.InfraClaim{}))
		}, timeout).Should(BeTrue())
		Expect(time.Now()).To(BeTemporally(">=", got.Status.ExpiresAt.Time))
		Eventually(func() []string { return warningReasons(ctx, got) }, timeout).Should(ContainElement(v1alpha1.ReasonExpired))
		Eventually(getResource(ctx, resName), timeout).Should(WithTransform(resourcePhase, Equal(v1alpha1.ResourceReleased)))
	})

	It("bounds a lifetime by the class's maxLifetime, gives one to a claim without, and extends on an edit", func() {
		Expect(k8s.Create(ctx, newClass("max-"+ns, kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.MaxLifetime = &metav1.Duration{Duration: 48 * time.Hour}
			c.Spec.LifetimeNotice = &metav1.Duration{Duration: time.Minute}
		}))).To(Succeed())
		long := newClaim(ns, "long", kind, "5Gi", func(c *v1alpha1.InfraClaim) {
			c.Spec.Lifetime = &metav1.Duration{Duration: 1000 * time.Hour}
		})
		none := newClaim(ns, "none", kind, "5Gi")
		Expect(k8s.Create(ctx, long)).To(Succeed())
		Expect(k8s.Create(ctx, none)).To(Succeed())
		expiresAfter := func(c *v1alpha1.InfraClaim) func() time.Duration {
			return func() time.Duration {
				got := getClaim(ctx, c)()
				if got.Status.ExpiresAt == nil {
					return 0
				}
				return got.Status.ExpiresAt.Sub(got.CreationTimestamp.Time)
			}
		}
		Eventually(expiresAfter(long), timeout).Should(Equal(48*time.Hour), "bounded by maxLifetime")
		Eventually(expiresAfter(none), timeout).Should(Equal(48*time.Hour), "the class's maxLifetime")
		Expect(meta.FindStatusCondition(getClaim(ctx, long)().Status.Conditions, v1alpha1.ConditionLifetimeEnding)).To(BeNil(),
			"far from the end (notice 1m): no LifetimeEnding")

		got := getClaim(ctx, none)()
		got.Spec.Lifetime = &metav1.Duration{Duration: 24 * time.Hour}
		Expect(k8s.Update(ctx, got)).To(Succeed())
		Eventually(expiresAfter(none), timeout).Should(Equal(24*time.Hour), "an edit moves the end")
	})
})
