//go:build e2e

package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 68, shared resources: the sample class minio-shared (config/samples/objectstore_shared_class.yaml)
// gives each claim a bucket and a user of its own in a MinIO server that the claims share.
var _ = Describe("A MinIO server shared by two namespaces' claims", func() {
	It("gives each claim its own bucket and keys, which open no other bucket; the server goes with the last claim", func() {
		class, template := sample("minio-shared", "team-bucket")
		Expect(k8s.Create(ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, class) })
		a, b := template.DeepCopy(), template.DeepCopy()
		a.Namespace, b.Namespace = newNamespace("e2e-share-a-"), newNamespace("e2e-share-b-")
		Expect(k8s.Create(ctx, a)).To(Succeed())
		Expect(k8s.Create(ctx, b)).To(Succeed())
		a, aRes := claimReady(a)
		b, bRes := claimReady(b)
		sharedName := aRes.Labels[v1alpha1.LabelShareOf]
		Expect(sharedName).NotTo(BeEmpty())
		Expect(bRes.Labels[v1alpha1.LabelShareOf]).To(Equal(sharedName), "one server for both claims")
		shared := &v1alpha1.InfraResource{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: sharedName}, shared)).To(Succeed())
		Expect(shared.Spec.ClaimRef).To(BeNil())
		storeNS := "minio-" + sharedName
		GinkgoWriter.Printf("claims %s/%s and %s/%s share %s (namespace %s): shares %s and %s\n",
			a.Namespace, a.Name, b.Namespace, b.Name, sharedName, storeNS, aRes.Name, bRes.Name)

		conn := func(c *v1alpha1.InfraClaim) *corev1.Secret {
			s := &corev1.Secret{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "team-bucket-s3"}, s)).To(Succeed())
			return s
		}
		aConn, bConn := conn(a), conn(b)
		Expect(string(aConn.Data["bucket"])).To(Equal(a.Namespace + "-team-bucket"))
		Expect(string(bConn.Data["bucket"])).To(Equal(b.Namespace + "-team-bucket"))
		Expect(aConn.Data["access_key"]).NotTo(Equal(bConn.Data["access_key"]))
		Expect(aConn.Data["secret_key"]).NotTo(Equal(bConn.Data["secret_key"]))
		Expect(aConn.Data["endpoint"]).To(Equal(bConn.Data["endpoint"]))

		By("each claim writes and reads its own bucket with its own keys")
		Expect(s3(a.Namespace, "team-bucket-s3", "roundtrip", "a.txt", "written by A")).To(ContainSubstring(`"written by A"`))
		Expect(s3(b.Namespace, "team-bucket-s3", "roundtrip", "b.txt", "written by B")).To(ContainSubstring(`"written by B"`))

		By("A's keys on B's bucket are refused")
		cross := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: "cross"}, Data: map[string][]byte{
			"endpoint": aConn.Data["endpoint"], "access_key": aConn.Data["access_key"], "secret_key": aConn.Data["secret_key"], "bucket": bConn.Data["bucket"]}}
		Expect(k8s.Create(ctx, cross)).To(Succeed())
		for _, args := range [][]string{{"list"}, {"get", "b.txt"}, {"put", "x.txt", "A writes into B"}} {
			phase, out := s3Run(a.Namespace, "cross", args...)
			Expect(phase).To(Equal(corev1.PodFailed), "A's keys %v on B's bucket: %s", args, out)
			Expect(out).To(ContainSubstring("Access Denied"))
		}

		By("A released: its share is reclaimed, the server stays and B still reads its bucket")
		Expect(k8s.Delete(ctx, a)).To(Succeed())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: aRes.Name}})).Should(BeTrue())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: sharedName}, &v1alpha1.InfraResource{})).To(Succeed())
		Expect(s3(b.Namespace, "team-bucket-s3", "get", "b.txt")).To(Equal("written by B\n"))

		By("B released, the last: its share, then the server and its namespace, are reclaimed")
		start := time.Now()
		Expect(k8s.Delete(ctx, b)).To(Succeed())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: bRes.Name}})).Should(BeTrue())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: sharedName}})).Should(BeTrue())
		eventually(isGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storeNS}})).Should(BeTrue())
		GinkgoWriter.Printf("server %s reclaimed %s after its last claim was deleted\n", sharedName, time.Since(start).Round(time.Second))
	})
})
