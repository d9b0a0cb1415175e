package claim_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
)

const timeout = 60 * time.Second

// uniqueKind keeps each spec's cluster-scoped resources and classes out of the others' way.
func uniqueKind() string { return "Kind" + rand.String(8) }

func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "claims-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

func staticResource(name, kind, capacity string, mutate ...func(*v1alpha1.InfraResource)) *v1alpha1.InfraResource {
	r := &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{
			ResourceKind: kind,
			Module:       v1alpha1.ModuleSource{Source: "example.org/platform/db/aws", Version: "1.0.0"},
			Capacity:     v1alpha1.Quantities{"storage": resource.MustParse(capacity)},
			Capabilities: map[string]string{"engine": "mysql", "version": "8.0.35"},
		},
	}
	for _, m := range mutate {
		m(r)
	}
	return r
}

func newClaim(ns, name, kind, request string, mutate ...func(*v1alpha1.InfraClaim)) *v1alpha1.InfraClaim {
	c := &v1alpha1.InfraClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.InfraClaimSpec{
			ResourceKind: kind,
			Resources:    v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse(request)}},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func newClass(name, kind string, isDefault bool, mutate ...func(*v1alpha1.InfraClass)) *v1alpha1.InfraClass {
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{
			ResourceKind: kind,
			Default:      isDefault,
			Module:       v1alpha1.ModuleSource{Source: "git::https://example.org/modules.git//db", Version: "v1.2.0"},
			Variables: v1alpha1.Variables{
				"name":        {Raw: []byte(`"${claim.namespace}-${claim.name}"`)},
				"storage_gib": {Raw: []byte(`"${gibibytes(claim.spec.resources.requests.storage)}"`)},
				"node_count":  {Raw: []byte(`4`)},
			},
			Capabilities: map[string]string{"engine": "mysql", "version": "8.0.35"},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func getClaim(ctx context.Context, c *v1alpha1.InfraClaim) func() *v1alpha1.InfraClaim {
	return func() *v1alpha1.InfraClaim {
		out := &v1alpha1.InfraClaim{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), out)).To(Succeed())
		return out
	}
}

func getResource(ctx context.Context, name string) func() *v1alpha1.InfraResource {
	return func() *v1alpha1.InfraResource {
		out := &v1alpha1.InfraResource{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, out)).To(Succeed())
		return out
	}
}

func phaseOf(c *v1alpha1.InfraClaim) v1alpha1.ClaimPhase { return c.Status.Phase }

func boundReason(c *v1alpha1.InfraClaim) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound); cond != nil {
		return cond.Reason
	}
	return ""
}

func resourcePhase(r *v1alpha1.InfraResource) v1alpha1.ResourcePhase { return r.Status.Phase }

func createAvailable(ctx context.Context, r *v1alpha1.InfraResource) {
	Expect(k8s.Create(ctx, r)).To(Succeed())
	Eventually(getResource(ctx, r.Name), timeout).Should(WithTransform(resourcePhase, Equal(v1alpha1.ResourceAvailable)))
}

var _ = Describe("Claim binding", func() {
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

	It("binds a claim to the resource it names (static binding)", func() {
		createAvailable(ctx, staticResource("static-"+ns, kind, "10Gi"))
		claim := newClaim(ns, "db", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = "static-" + ns })
		Expect(k8s.Create(ctx, claim)).To(Succeed())

		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		got := getClaim(ctx, claim)()
		Expect(got.Status.ResourceName).To(Equal("static-" + ns))
		Expect(got.Status.Capacity).To(HaveKeyWithValue("storage", resource.MustParse("10Gi")))
		Expect(got.Finalizers).To(ContainElement(v1alpha1.FinalizerClaim))
		Eventually(getResource(ctx, "static-"+ns), timeout).Should(WithTransform(resourcePhase, Equal(v1alpha1.ResourceBound)))
		res := getResource(ctx, "static-"+ns)()
		Expect(res.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: ns, Name: "db", UID: got.UID}))
	})

	It("binds a claim to a resource pre-bound to it over a smaller free one", func() {
		createAvailable(ctx, staticResource("free-"+ns, kind, "6Gi"))
		// Available once the manager's cache holds it (a reservation stays Available, as a pre-bound
		// PV): a claim created before then could bind the free one, which is all it sees.
		createAvailable(ctx, staticResource("pre-"+ns, kind, "100Gi", func(r *v1alpha1.InfraResource) {
			r.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: ns, Name: "db"}
		}))
		claim := newClaim(ns, "db", kind, "5Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())

		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(getClaim(ctx, claim)().Spec.ResourceName).To(Equal("pre-" + ns))
		Expect(getResource(ctx, "free-"+ns)().Spec.ClaimRef).To(BeNil())
	})

	It("binds the smallest Available resource that fits", func() {
		for _, size := range []string{"100Gi", "20Gi", "8Gi", "2Gi"} {
			createAvailable(ctx, staticResource(fmt.Sprintf("r%s-%s", size[:len(size)-2], ns), kind, size))
		}
		claim := newClaim(ns, "db", kind, "5Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(getClaim(ctx, claim)().Spec.ResourceName).To(Equal("r8-" + ns))
	})

	It("provisions a resource from the default class when nothing matches (dynamic provisioning)", func() {
		Expect(k8s.Create(ctx, newClass("cls-"+ns, kind, true, func(c *v1alpha1.InfraClass) {
			c.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain
		}))).To(Succeed())
		createAvailable(ctx, staticResource("small-"+ns, kind, "1Gi")) // too small: not a match
		claim := newClaim(ns, "db", kind, "25Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())

		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		got := getClaim(ctx, claim)()
		res := getResource(ctx, got.Spec.ResourceName)()
		Expect(res.Name).NotTo(Equal("small-" + ns))
		Expect(res.Spec.ClassRef).To(Equal(&v1alpha1.ClassReference{Name: "cls-" + ns}))
		Expect(res.Spec.Module).To(Equal(v1alpha1.ModuleSource{Source: "git::https://example.org/modules.git//db", Version: "v1.2.0"}))
		Expect(res.Spec.Capacity).To(HaveKeyWithValue("storage", resource.MustParse("25Gi")))
		Expect(res.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimRetain))
		Expect(res.Spec.ClaimRef).To(Equal(&v1alpha1.ClaimReference{Namespace: ns, Name: "db", UID: got.UID}))
		Expect(res.Labels).To(And(HaveKeyWithValue(v1alpha1.LabelClaimNamespace, ns), HaveKeyWithValue(v1alpha1.LabelClaimName, "db")))
		Expect(res.Spec.Variables).To(Equal(v1alpha1.Variables{
			"name":        apiextensionsv1.JSON{Raw: []byte(`"` + ns + `-db"`)},
			"storage_gib": apiextensionsv1.JSON{Raw: []byte(`25`)},
			"node_count":  apiextensionsv1.JSON{Raw: []byte(`4`)},
		}))
	})

	It("releases the resource when its claim is deleted, keeping claimRef", func() {
		createAvailable(ctx, staticResource("rel-"+ns, kind, "10Gi"))
		claim := newClaim(ns, "db", kind, "5Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))

		Expect(k8s.Delete(ctx, claim)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(claim), &v1alpha1.InfraClaim{}))
		}, timeout).Should(BeTrue())
		Eventually(getResource(ctx, "rel-"+ns), timeout).Should(WithTransform(resourcePhase, Equal(v1alpha1.ResourceReleased)))
		Expect(getResource(ctx, "rel-"+ns)().Spec.ClaimRef).NotTo(BeNil())

		// A released resource is never bound again: a new claim of the same kind stays Pending.
		again := newClaim(ns, "db2", kind, "5Gi")
		Expect(k8s.Create(ctx, again)).To(Succeed())
		Eventually(getClaim(ctx, again), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonNoMatchingResource)))
	})

	It("keeps a Bound resource that is deleted (in-use protection), and marks its claim Lost once it is forced away", func() {
		createAvailable(ctx, staticResource("lost-"+ns, kind, "10Gi"))
		claim := newClaim(ns, "db", kind, "5Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))

		Expect(k8s.Delete(ctx, getResource(ctx, "lost-"+ns)())).To(Succeed())
		Consistently(func() []string { return getResource(ctx, "lost-"+ns)().Finalizers }, 2*time.Second, 200*time.Millisecond).
			Should(ContainElement(v1alpha1.FinalizerInUse), "as pv-protection: a resource in use is not deleted")
		Expect(phaseOf(getClaim(ctx, claim)())).To(Equal(v1alpha1.ClaimBound))

		// An admin removes the finalizers by hand: the resource goes, and its claim is Lost.
		Eventually(func() error {
			res := getResource(ctx, "lost-"+ns)()
			res.Finalizers = nil
			return k8s.Update(ctx, res)
		}, timeout).Should(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimLost)))
		Expect(boundReason(getClaim(ctx, claim)())).To(Equal(v1alpha1.ReasonResourceLost))
	})

	Describe("a race: 200 claims created at once against 50 Available resources", func() {
		createRace := func(ns, kind string) []*v1alpha1.InfraClaim {
			for i := 0; i < 50; i++ {
				Expect(k8s.Create(ctx, staticResource(fmt.Sprintf("race-%s-%02d", ns, i), kind, "10Gi"))).To(Succeed())
			}
			Eventually(func() int {
				list := &v1alpha1.InfraResourceList{}
				Expect(k8s.List(ctx, list)).To(Succeed())
				n := 0
				for _, r := range list.Items {
					if r.Spec.ResourceKind == kind && r.Status.Phase == v1alpha1.ResourceAvailable {
						n++
					}
				}
				return n
			}, timeout).Should(Equal(50))
			claims := make([]*v1alpha1.InfraClaim, 200)
			var wg sync.WaitGroup
			for i := range claims {
				claims[i] = newClaim(ns, fmt.Sprintf("c%03d", i), kind, "5Gi")
				wg.Add(1)
				go func(c *v1alpha1.InfraClaim) {
					defer GinkgoRecover()
					defer wg.Done()
					Expect(k8s.Create(ctx, c)).To(Succeed())
				}(claims[i])
			}
			wg.Wait()
			return claims
		}
		// settled lists the claims once every one has a Bound condition, and checks that no
		// resource is held by two claims and every bound claim's resource names it back.
		settled := func(ns string, want int) []v1alpha1.InfraClaim {
			var list v1alpha1.InfraClaimList
			Eventually(func(g Gomega) {
				g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
				bound := 0
				for _, c := range list.Items {
					cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound)
					g.Expect(cond).NotTo(BeNil())
					g.Expect(cond.Reason).NotTo(Equal(v1alpha1.ReasonWaitingForResource), "claim %s still retrying", c.Name)
					if c.Status.Phase == v1alpha1.ClaimBound {
						bound++
					}
				}
				g.Expect(bound).To(Equal(want))
			}, 3*timeout, time.Second).Should(Succeed())
			holders := map[string]string{}
			for _, c := range list.Items {
				if c.Status.Phase != v1alpha1.ClaimBound {
					continue
				}
				Expect(holders).NotTo(HaveKey(c.Spec.ResourceName), "resource %s bound twice", c.Spec.ResourceName)
				holders[c.Spec.ResourceName] = c.Name
				res := getResource(ctx, c.Spec.ResourceName)()
				Expect(res.Spec.ClaimRef.UID).To(Equal(c.UID))
			}
			return list.Items
		}

		It("binds exactly 50 claims, none twice, and leaves the others Pending with a reason", func() {
			createRace(ns, kind)
			claims := settled(ns, 50)
			Consistently(func() int {
				list := &v1alpha1.InfraClaimList{}
				Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				n := 0
				for _, c := range list.Items {
					if c.Status.Phase == v1alpha1.ClaimBound {
						n++
					}
				}
				return n
			}, 3*time.Second).Should(Equal(50))
			for _, c := range claims {
				if c.Status.Phase != v1alpha1.ClaimBound {
					Expect(c.Status.Phase).To(Equal(v1alpha1.ClaimPending))
					Expect(boundReason(&c)).To(Equal(v1alpha1.ReasonNoMatchingResource))
				}
			}
		})

		It("binds all 200 when a default class provisions the other 150", func() {
			Expect(k8s.Create(ctx, newClass("race-"+ns, kind, true))).To(Succeed())
			createRace(ns, kind)
			claims := settled(ns, 200)
			static := 0
			for _, c := range claims {
				if res := getResource(ctx, c.Spec.ResourceName)(); res.Spec.ClassRef == nil {
					static++
				}
			}
			Expect(static).To(Equal(50), "every static resource is used before provisioning")
		})
	})
})

var _ = Describe("Provisioned resource names", func() {
	It("provisions under a longer name when the short one is another claim's resource (a 5-hex collision)", func() {
		// Issue 33: claims of the same name whose UID hashes share 5 hex characters collided on
		// the resource name, and the second stayed Pending forever.
		ctx := context.Background()
		ns, kind := newNamespace(ctx), uniqueKind()
		claim := newClaim(ns, "db", kind, "1Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		got := getClaim(ctx, claim)()
		squat := staticResource(provision.ResourceName(got), kind, "1Gi", func(r *v1alpha1.InfraResource) {
			r.Spec.ClaimRef = &v1alpha1.ClaimReference{Namespace: "elsewhere", Name: "db", UID: "another-claim"}
			r.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain
		})
		Expect(k8s.Create(ctx, squat)).To(Succeed())
		Expect(k8s.Create(ctx, newClass("cls-"+ns, kind, true))).To(Succeed())

		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		bound := getClaim(ctx, claim)()
		Expect(bound.Spec.ResourceName).To(Equal(provision.ResourceNames(bound)[1]))
		Expect(getResource(ctx, bound.Spec.ResourceName)().Spec.ClaimRef.UID).To(Equal(bound.UID))
		Expect(getResource(ctx, squat.Name)().Spec.ClaimRef.UID).To(BeEquivalentTo("another-claim"), "the other claim's resource is left alone")
	})
})

var _ = Describe("A claim whose resource was not provisioned from a class (issue 69 item 5)", func() {
	It("says its parameters do not reach the resource (ParametersApplied=False), and stops saying so once it has none", func() {
		ctx := context.Background()
		ns, kind := newNamespace(ctx), uniqueKind()
		createAvailable(ctx, staticResource("adopted-"+ns, kind, "10Gi", func(r *v1alpha1.InfraResource) {
			r.Spec.ClassRef = &v1alpha1.ClassReference{Name: "some-class"} // as kubectl conductor adopt makes it
		}))
		claim := newClaim(ns, "db", kind, "5Gi", func(c *v1alpha1.InfraClaim) {
			c.Spec.ResourceName = "adopted-" + ns
			c.Spec.Parameters = v1alpha1.Variables{"tier": {Raw: []byte(`"gold"`)}}
		})
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(func(c *v1alpha1.InfraClaim) string {
			if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionParametersApplied); cond != nil && cond.Status == metav1.ConditionFalse {
				return cond.Reason + ": " + cond.Message
			}
			return ""
		}, And(HavePrefix(v1alpha1.ReasonResourceNotFromClass), ContainSubstring("adopted-"+ns))))
		Expect(phaseOf(getClaim(ctx, claim)())).To(Equal(v1alpha1.ClaimBound))

		Eventually(func() error {
			c := getClaim(ctx, claim)()
			c.Spec.Parameters = nil
			return k8s.Update(ctx, c)
		}, timeout).Should(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(func(c *v1alpha1.InfraClaim) *metav1.Condition {
			return meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionParametersApplied)
		}, BeNil()))
	})
})
