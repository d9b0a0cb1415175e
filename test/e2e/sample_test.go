//go:build e2e

package e2e_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// sample returns the sample class and claim named so, with the module source served to the pods.
func sample(class, claim string) (*v1alpha1.InfraClass, *v1alpha1.InfraClaim) {
	samples, err := harness.LoadSamples(modulesURL)
	Expect(err).NotTo(HaveOccurred())
	var c *v1alpha1.InfraClass
	var cl *v1alpha1.InfraClaim
	for i := range samples.Classes {
		if samples.Classes[i].Name == class {
			c = samples.Classes[i].DeepCopy()
		}
	}
	for i := range samples.Claims {
		if samples.Claims[i].Name == claim {
			cl = samples.Claims[i].DeepCopy()
		}
	}
	Expect(c).NotTo(BeNil())
	Expect(cl).NotTo(BeNil())
	return c, cl
}

func readyCondition(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady); c != nil {
		return string(c.Status) + " " + c.Reason + ": " + c.Message
	}
	return ""
}

func newNamespace(prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

var _ = Describe("The sample rook-minio class, in the cluster", Ordered, func() {
	It("turns the sample claim Ready from the manager's pod, writes the connection Secret, and reclaims it all", func() {
		class, claim := sample("minio-standard", "assets")
		Expect(k8s.Create(ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, class) })
		eventually(func() string {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			return readyCondition(got.Status.Conditions)
		}).Should(HavePrefix("True"), "the manager's pod fetches the module over git")

		claim.Namespace = newNamespace("e2e-sample-")
		start := time.Now()
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		eventually(func() string {
			got := &v1alpha1.InfraClaim{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
			return readyCondition(got.Status.Conditions)
		}).Should(HavePrefix("True"))
		GinkgoWriter.Printf("claim Ready in %s\n", time.Since(start).Round(time.Second))
		got := &v1alpha1.InfraClaim{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
		res := &v1alpha1.InfraResource{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: got.Spec.ResourceName}, res)).To(Succeed())
		Expect(res.Status.LastRun.Controller).To(HavePrefix(deployment), "the run was the manager pod's")
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Spec.WriteConnectionSecretToRef.Name}, secret)).To(Succeed())
		Expect(secret.Data).To(HaveKey("endpoint"))
		storeNS := "minio-" + claim.Namespace + "-assets"
		Expect(kubectl("get", "objectstores.minio.rook.io", "-n", storeNS, "-o", "name")).To(ContainSubstring("assets"))

		By("deleting the claim: reclaim policy Delete destroys the module's objects, the state and the resource")
		Expect(k8s.Delete(ctx, got)).To(Succeed())
		eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}))
		}).Should(BeTrue())
		eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: storeNS}, &corev1.Namespace{}))
		}).Should(BeTrue())
		Expect(strings.TrimSpace(kubectl("get", "secrets", "-n", system, "-l", "conductor.io/resource="+res.Name, "-o", "name"))).To(BeEmpty())
	})
})
