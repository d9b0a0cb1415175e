//go:build e2e

package e2e_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 48 item 1 on kind: the sample rook-minio class made poolable (every name from
// resource.name, which a pooled resource keeps, and a fixed bucket), a pool of one, and a claim
// → Ready with a ready member against one the pool does not fit (it waits for its own apply).
var _ = Describe("A ready pool of the rook-minio class, in the cluster", func() {
	It("binds a claim to a MinIO server applied before it asked, which it writes to; a claim the pool does not fit waits for its apply", func() {
		sampleClass, sampleClaim := sample("minio-standard", "assets")
		class := sampleClass.DeepCopy()
		class.ObjectMeta = metav1.ObjectMeta{Name: "minio-pooled"}
		class.Spec.Default = false
		class.Spec.Variables["name"] = apiextensionsv1.JSON{Raw: []byte(`"${resource.name}"`)}
		class.Spec.Variables["bucket"] = apiextensionsv1.JSON{Raw: []byte(`"data"`)}
		for addr, id := range class.Spec.ImportIdentities {
			class.Spec.ImportIdentities[addr] = strings.ReplaceAll(id, "${claim.name}", "${resource.name}")
		}
		class.Spec.ReadyPool = &v1alpha1.ReadyPool{Size: 1, Resources: sampleClaim.Spec.Resources}
		start := time.Now()
		Expect(k8s.Create(ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, class) })
		eventually(func() int32 {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			if got.Status.ReadyPool == nil {
				return 0
			}
			return got.Status.ReadyPool.Ready
		}).Should(BeEquivalentTo(1), "the pool's member is applied before any claim")
		filled := time.Since(start)

		claim := func(ns string, requests v1alpha1.Quantities) (*v1alpha1.InfraClaim, *v1alpha1.InfraResource, time.Duration) {
			c := sampleClaim.DeepCopy()
			c.Namespace = ns
			c.Spec.ClassName = class.Name
			c.Spec.Resources.Requests = requests
			begin := time.Now()
			Expect(k8s.Create(ctx, c)).To(Succeed())
			got, res := claimReady(c)
			return got, res, time.Since(begin)
		}
		pooledNS := newNamespace("e2e-pool-")
		pooled, member, withPool := claim(pooledNS, sampleClaim.Spec.Resources.Requests)
		Expect(member.Name).To(HavePrefix(class.Name+"-pool-"), "bound to the pool's member")
		out := s3(pooledNS, "assets-s3", "roundtrip", "pooled.txt", "written to a server made before the claim")
		Expect(out).To(ContainSubstring(`"written to a server made before the claim"`))

		bigger := v1alpha1.Quantities{"storage": resource.MustParse("9Gi")}
		plainNS := newNamespace("e2e-nopool-")
		plain, own, withoutPool := claim(plainNS, bigger)
		Expect(own.Name).NotTo(HavePrefix(class.Name+"-pool-"), "provisioned for the claim: the pool's requests differ")
		fmt.Fprintf(GinkgoWriter, "ready pool, rook-minio on kind: claim → Ready with a ready member %s, provisioned %s (%.3f×); pool of 1 filled in %s\n",
			withPool.Round(time.Millisecond), withoutPool.Round(time.Millisecond), withPool.Seconds()/withoutPool.Seconds(), filled.Round(time.Second))
		AddReportEntry("ready pool claim → Ready", fmt.Sprintf("with %s, without %s", withPool.Round(time.Millisecond), withoutPool.Round(time.Millisecond)))

		By("deleting the claims and the class: the servers, the refilled member and their namespaces go")
		Expect(k8s.Delete(ctx, pooled)).To(Succeed())
		Expect(k8s.Delete(ctx, plain)).To(Succeed())
		Expect(k8s.Delete(ctx, class)).To(Succeed())
		for _, r := range []*v1alpha1.InfraResource{member, own} {
			eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: r.Name}})).Should(BeTrue())
			eventually(isGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "minio-" + r.Name}})).Should(BeTrue())
		}
		eventually(func() int {
			list := &v1alpha1.InfraResourceList{}
			Expect(k8s.List(ctx, list, client.MatchingLabels{v1alpha1.LabelReadyPool: class.Name})).To(Succeed())
			return len(list.Items)
		}).Should(BeZero(), "the refilled member is deleted with its class")
	})
})
