package controller_test

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller"
)

// labelledNamespace creates a namespace with these labels.
func labelledNamespace(ctx context.Context, labels map[string]string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-", Labels: labels}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// Issue 18: a platform team says which namespaces a class or a resource is for.
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
		Expect(k8s.Create(ctx, outsider)).To(Succeed())
		Eventually(getClaim(ctx, outsider), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonClassNotAllowed)))
		Consistently(func() error {
			return k8s.Get(ctx, client.ObjectKey{Name: controller.ResourceName(getClaim(ctx, outsider)())}, &v1alpha1.InfraResource{})
		}, 2*time.Second, 200*time.Millisecond).ShouldNot(Succeed(), "nothing is provisioned for a namespace the class is not offered to")

		insider := newClaim(a, "db", kind, "5Gi")
		Expect(k8s.Create(ctx, insider)).To(Succeed())
		Eventually(getClaim(ctx, insider), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		res := getResource(ctx, getClaim(ctx, insider)().Spec.ResourceName)()
		Expect(res.Spec.AllowedNamespaces).To(Equal(teamA), "the provisioned resource keeps the class's namespaces")
	})

	It("a resource offered to team a is never bound from another namespace, named or matched", func() {
		res := staticResource("for-a-"+strings.ToLower(kind), kind, "10Gi", func(r *v1alpha1.InfraResource) { r.Spec.AllowedNamespaces = teamA })
		createAvailable(ctx, res)
		b := labelledNamespace(ctx, map[string]string{"team": "b"})
		named := newClaim(b, "named", kind, "5Gi", func(c *v1alpha1.InfraClaim) { c.Spec.ResourceName = res.Name })
		Expect(k8s.Create(ctx, named)).To(Succeed())
		Eventually(getClaim(ctx, named), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonResourceNotAllowed)))
		matched := newClaim(b, "matched", kind, "5Gi")
		Expect(k8s.Create(ctx, matched)).To(Succeed())
		Eventually(getClaim(ctx, matched), timeout).Should(WithTransform(boundReason, Equal(v1alpha1.ReasonNoMatchingResource)))
		Expect(getResource(ctx, res.Name)().Spec.ClaimRef).To(BeNil())

		a := labelledNamespace(ctx, map[string]string{"team": "a"})
		ok := newClaim(a, "db", kind, "5Gi")
		Expect(k8s.Create(ctx, ok)).To(Succeed())
		Eventually(getClaim(ctx, ok), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(getClaim(ctx, ok)().Spec.ResourceName).To(Equal(res.Name))
	})
})
