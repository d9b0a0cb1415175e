package claim_test

import (
	"context"
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
			c.Spec.Lifetime = &v1alpha1.Duration{Duration: 8 * time.Second}
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
			c.Spec.MaxLifetime = &v1alpha1.Duration{Duration: 48 * time.Hour}
			c.Spec.LifetimeNotice = &v1alpha1.Duration{Duration: time.Minute}
		}))).To(Succeed())
		long := newClaim(ns, "long", kind, "5Gi", func(c *v1alpha1.InfraClaim) {
			c.Spec.Lifetime = &v1alpha1.Duration{Duration: 1000 * time.Hour}
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
		got.Spec.Lifetime = &v1alpha1.Duration{Duration: 24 * time.Hour}
		Expect(k8s.Update(ctx, got)).To(Succeed())
		Eventually(expiresAfter(none), timeout).Should(Equal(24*time.Hour), "an edit moves the end")
	})
})

// Issue 65 item 4: no retroactive lifetimes. Before, a class's new maxLifetime ended every claim
// older than it at once: the end was the claim's creation plus the class's current maximum, and
// the deletion came before any notice.
var _ = Describe("A class's new maxLifetime", func() {
	It("deletes no older claim at once: each is told a whole notice before, and expiresAt is at least a notice away", func() {
		ctx := context.Background()
		ns, kind := newNamespace(ctx), uniqueKind()
		class := newClass("newmax-"+ns, kind, true)
		Expect(k8s.Create(ctx, class)).To(Succeed())
		claim := newClaim(ns, "old", kind, "5Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(getClaim(ctx, claim)().Status.ExpiresAt).To(BeNil())
		time.Sleep(2 * time.Second) // the claim is now older than the class's new maximum

		By("the class gets maxLifetime 1s (notice 1h, the default): the claim is 2 s old")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(class), class)).To(Succeed())
		class.Spec.MaxLifetime = &v1alpha1.Duration{Duration: time.Second}
		Expect(k8s.Update(ctx, class)).To(Succeed())
		told := time.Now()
		// The class's change wakes its bound claims (claimsForClass), which may write the claim as
		// this edit does: the edit is retried on a conflict.
		Eventually(func() error {
			got := getClaim(ctx, claim)()
			got.Labels = map[string]string{"touched": "yes"}
			return k8s.Update(ctx, got)
		}, timeout).Should(Succeed())
		Eventually(func() bool {
			return meta.IsStatusConditionTrue(getClaim(ctx, claim)().Status.Conditions, v1alpha1.ConditionLifetimeEnding)
		}, timeout).Should(BeTrue())
		got := getClaim(ctx, claim)()
		Expect(got.DeletionTimestamp).To(BeNil())
		Expect(got.Status.ExpiresAt).NotTo(BeNil())
		Expect(got.Status.ExpiresAt.Time).To(BeTemporally(">=", told.Add(time.Hour-2*time.Second)), "at least a whole notice after it was told")
		Expect(meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionLifetimeEnding).Message).To(ContainSubstring("held a whole notice"))
		Eventually(func() []string { return warningReasons(ctx, got) }, timeout).Should(ContainElement(v1alpha1.ReasonLifetimeEnding))

		By("it stays put across reconciles: not deleted, the same end")
		end := got.Status.ExpiresAt.Time
		got.Labels["touched"] = "again"
		Expect(k8s.Update(ctx, got)).To(Succeed())
		Consistently(func() (time.Time, error) {
			c := &v1alpha1.InfraClaim{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(claim), c); err != nil {
				return time.Time{}, err
			}
			if c.Status.ExpiresAt == nil {
				return time.Time{}, nil
			}
			return c.Status.ExpiresAt.Time, nil
		}, 3*time.Second, 500*time.Millisecond).Should(BeTemporally("~", end, time.Second))
	})
})

// Issue 65 item 5: every lifetime the API admits is one the controller decodes. Before,
// `lifetime: 9999999h` matched the CRD's pattern but not Go's duration range: the claim informer
// failed to list, and no claim in any namespace was reconciled until it was deleted; `0s` silently
// meant no lifetime.
var _ = Describe("A lifetime out of Go's range", func() {
	It("is refused at admission, as is 0s", func() {
		ctx := context.Background()
		ns := newNamespace(ctx)
		for _, bad := range []string{"9999999h", "0s"} {
			claim := newClaim(ns, "bad", uniqueKind(), "5Gi")
			u := map[string]any{}
			raw, err := json.Marshal(claim)
			Expect(err).NotTo(HaveOccurred())
			Expect(json.Unmarshal(raw, &u)).To(Succeed())
			u["spec"].(map[string]any)["lifetime"] = bad
			obj := &unstructured.Unstructured{Object: u}
			obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("InfraClaim"))
			err = k8s.Create(ctx, obj)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "lifetime %s: %v", bad, err)
			Expect(err.Error()).To(ContainSubstring("lifetime must be a duration above 0s"))
		}
		class := newClass("badmax-"+ns, uniqueKind(), false)
		raw, err := json.Marshal(class)
		Expect(err).NotTo(HaveOccurred())
		u := map[string]any{}
		Expect(json.Unmarshal(raw, &u)).To(Succeed())
		u["spec"].(map[string]any)["maxLifetime"] = "9999999h"
		obj := &unstructured.Unstructured{Object: u}
		obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("InfraClass"))
		Expect(apierrors.IsInvalid(k8s.Create(ctx, obj))).To(BeTrue())
	})
})

// Issue 65 item 5: a claim stored with a lifetime Go cannot hold ("9999999h", admitted by the CRD
// before its CEL rule) made the claims list undecodable ("time: invalid duration"): the cache
// stalled, and no claim of any namespace was reconciled until it was deleted, while the bad claim
// itself said nothing.
var _ = Describe("A claim whose lifetime the controller cannot read", func() {
	It("stops no other claim, says so on itself, and is not ended by it", func() {
		ctx := context.Background()
		ns, kind := newNamespace(ctx), uniqueKind()
		Expect(k8s.Create(ctx, newClass("badlife-"+ns, kind, true))).To(Succeed())

		By("the CRD as it was before its lifetime rule: 9999999h is admitted")
		restore := dropLifetimeRule(ctx)
		DeferCleanup(restore)
		bad := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "InfraClaim",
			"metadata": map[string]any{"namespace": ns, "name": "bad"},
			"spec": map[string]any{"resourceKind": kind, "lifetime": "9999999h",
				"resources": map[string]any{"requests": map[string]any{"storage": "5Gi"}}},
		}}
		Eventually(func() error { return k8s.Create(ctx, bad.DeepCopy()) }, timeout).Should(Succeed())

		By("a claim made after it is bound (the claims list still decodes)")
		good := newClaim(ns, "good", kind, "5Gi")
		Expect(k8s.Create(ctx, good)).To(Succeed())
		Eventually(getClaim(ctx, good), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))

		By("the bad claim says InvalidDuration, keeps what its author wrote, and is not deleted")
		badClaim := &v1alpha1.InfraClaim{}
		badClaim.Namespace, badClaim.Name = ns, "bad"
		Eventually(func() string {
			c := getClaim(ctx, badClaim)()
			if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionLifetimeEnding); cond != nil {
				return string(cond.Status) + " " + cond.Reason + ": " + cond.Message
			}
			return ""
		}, timeout).Should(And(HavePrefix("Unknown "+v1alpha1.ReasonInvalidDuration), ContainSubstring(`"9999999h"`)))
		got := getClaim(ctx, badClaim)()
		Expect(got.DeletionTimestamp).To(BeNil())
		Expect(got.Status.ExpiresAt).To(BeNil())
		Expect(got.Spec.Lifetime.Unparsed).To(Equal(`"9999999h"`))
		Eventually(func() []string { return warningReasons(ctx, got) }, timeout).Should(ContainElement(v1alpha1.ReasonInvalidDuration))
		raw := &unstructured.Unstructured{}
		raw.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("InfraClaim"))
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(got), raw)).To(Succeed())
		Expect(raw.Object["spec"].(map[string]any)["lifetime"]).To(Equal("9999999h"), "the controller's writes kept the value as written")
		Expect(k8s.Delete(ctx, got)).To(Succeed())
	})
})

// dropLifetimeRule removes the CEL rule of the InfraClaim CRD's spec.lifetime (as the CRD was before
// issue 65), and returns what puts it back. Errors fail the spec.
func dropLifetimeRule(ctx context.Context) func() {
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	key := client.ObjectKey{Name: "infraclaims." + v1alpha1.GroupVersion.Group}
	Expect(k8s.Get(ctx, key, crd)).To(Succeed())
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	path := []string{"schema", "openAPIV3Schema", "properties", "spec", "properties", "lifetime", "x-kubernetes-validations"}
	version := versions[0].(map[string]any)
	rules, found, err := unstructured.NestedSlice(version, path...)
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeTrue(), "the CRD's spec.lifetime has a CEL rule")
	unstructured.RemoveNestedField(version, path...)
	Expect(unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions")).To(Succeed())
	Expect(k8s.Update(ctx, crd)).To(Succeed())
	return func() {
		Eventually(func() error {
			if err := k8s.Get(ctx, key, crd); err != nil {
				return err
			}
			versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
			if err := unstructured.SetNestedSlice(versions[0].(map[string]any), rules, path...); err != nil {
				return err
			}
			if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
				return err
			}
			return k8s.Update(ctx, crd)
		}, timeout).Should(Succeed())
	}
}
