package lifecycle_test

import (
	"os"
	"path/filepath"
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

// Issue 48 item 1 with real runs: the ledger module's terraform_data records each create in a
// file (a change of its input is an update, which records nothing), so the ledger tells a member
// applied for the pool and updated for its claim from one replaced or created for the claim.
var _ = Describe("A ready pool", func() {
	It("binds a claim to a member applied before it asked, applies the claim's parameter as an update, refills, and reclaims", func() {
		s := newScenario()
		ledger := filepath.Join(s.dir, "ledger")
		src, _ := filepath.Abs("testdata/modules/ledger")
		class := &v1alpha1.InfraClass{
			ObjectMeta: metav1.ObjectMeta{Name: "pool-" + s.ns},
			Spec: v1alpha1.InfraClassSpec{ResourceKind: s.kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
				Module: v1alpha1.ModuleSource{Source: src, Version: "v1.0.0"},
				Variables: v1alpha1.Variables{"ledger": js(`"` + ledger + `"`), "seconds": js(`0`),
					"name": js(`"${lookup(claim.spec.parameters, \"name\", \"pooled\")}"`)},
				ReadyPool: &v1alpha1.ReadyPool{Size: 1,
					Resources: v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}}}},
		}
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		members := func() []v1alpha1.InfraResource {
			list := &v1alpha1.InfraResourceList{}
			Expect(k8s.List(s.ctx, list, client.MatchingLabels{v1alpha1.LabelReadyPool: v1alpha1.LabelValue(class.Name)})).To(Succeed())
			return list.Items
		}
		poolReady := func() int32 {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			if got.Status.ReadyPool == nil {
				return -1
			}
			return got.Status.ReadyPool.Ready
		}

		By("before any claim: one member applied (one create in the ledger), counted ready")
		Eventually(poolReady, timeout, time.Second).Should(BeEquivalentTo(1))
		Expect(members()).To(HaveLen(1))
		member := members()[0].Name
		Expect(ledgerLines(ledger)).To(Equal(1))

		By("a claim binds to the member at once, and its parameter is applied to it as an update")
		claim := &v1alpha1.InfraClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "quick"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: s.kind,
				Resources:                  v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}},
				Parameters:                 v1alpha1.Variables{"name": js(`"mine"`)},
				WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: "quick-conn"}},
		}
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		Eventually(func() string { return s.claim(claim)().Spec.ResourceName }, timeout, 100*time.Millisecond).Should(Equal(member))
		By("the claim reads Ready only once its own parameter is applied, not the pool's apply")
		Eventually(func() bool {
			return meta.IsStatusConditionTrue(s.claim(claim)().Status.Conditions, v1alpha1.ConditionReady)
		}, timeout, 50*time.Millisecond).Should(BeTrue())
		conn := &corev1.Secret{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "quick-conn"}, conn)).To(Succeed(), "Ready before the connection Secret")
		Expect(string(conn.Data["name"])).To(Equal("mine"), "Ready while the member held the pool's parameter")
		Eventually(func() map[string]string { return s.resource(member)().Annotations }, timeout, time.Second).ShouldNot(
			HaveKey(v1alpha1.AnnotationTakenFromPool))
		Eventually(func() string {
			conn := &corev1.Secret{}
			if err := k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "quick-conn"}, conn); err != nil {
				return err.Error()
			}
			return string(conn.Data["name"])
		}, timeout, time.Second).Should(Equal("mine"))
		got := s.resource(member)()
		Expect(got.Status.LastRun.Summary).To(Equal(&v1alpha1.PlanSummary{Change: 1}), "an update, not a replace")
		Expect(got.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimDelete))
		b, _ := os.ReadFile(ledger)
		Expect(string(b)).NotTo(ContainSubstring("create mine"))

		By("the pool refills: a second member is created and applied")
		Eventually(func() []v1alpha1.InfraResource { return members() }, timeout, time.Second).Should(
			ContainElement(HaveField("ObjectMeta.Name", Not(Equal(member)))))
		Eventually(poolReady, timeout, time.Second).Should(BeEquivalentTo(1))
		Expect(ledgerLines(ledger)).To(Equal(2))

		By("deleting the claim reclaims the member it took (Delete)")
		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: member}, &v1alpha1.InfraResource{}) }), timeout, time.Second).Should(BeTrue())

		By("deleting the class empties its pool")
		Expect(k8s.Delete(s.ctx, class)).To(Succeed())
		Eventually(func() []v1alpha1.InfraResource { return members() }, timeout, time.Second).Should(BeEmpty())
	})
})
