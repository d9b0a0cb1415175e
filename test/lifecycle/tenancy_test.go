package lifecycle_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("Quotas", func() {
	It("Kubernetes' object count quota count/infraclaims.conductor.io limits the claims of a namespace", func() {
		// Issue 18: a namespace's claims are bounded by a ResourceQuota, as any object is; the
		// API server refuses the claim over it, and the controller never sees it.
		s := newScenario()
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "claims"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/infraclaims.conductor.io": resource.MustParse("2")}}}
		Expect(k8s.Create(s.ctx, quota)).To(Succeed())
		Eventually(func() corev1.ResourceList {
			got := &corev1.ResourceQuota{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(quota), got)).To(Succeed())
			return got.Status.Hard
		}, timeout, 200*time.Millisecond).Should(HaveKey(corev1.ResourceName("count/infraclaims.conductor.io")))
		// As the namespace's team, which holds only the infraclaim-editor role.
		team, err := teams.Client(s.ctx, s.ns)
		Expect(err).NotTo(HaveOccurred())
		for i := range 2 {
			Expect(team.Create(s.ctx, fileClaim(s.ns, fmt.Sprintf("q%d", i), s.kind, s.dir, "x"))).To(Succeed())
		}
		err = team.Create(s.ctx, fileClaim(s.ns, "q2", s.kind, s.dir, "x"))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("exceeded quota"))
	})
})
