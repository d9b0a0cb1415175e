//go:build e2e

package e2e_test

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 67 on kind: a chain that ends in a pod. The claim "assets" makes a MinIO server
// (rook-minio); the claim "reports" reads its namespace, endpoint and keys (the secret key a
// sensitive output, passed from assets' connection Secret) and makes a bucket in it
// (minio-bucket); a pod with only reports' connection Secret writes to that bucket.
var _ = Describe("A chain of claims in the cluster: a MinIO store, then a bucket in it that a pod writes to", Ordered, func() {
	BeforeAll(func() {
		for _, name := range []string{"minio-standard", "minio-bucket"} {
			claim := "assets"
			if name == "minio-bucket" {
				claim = "reports"
			}
			class, _ := sample(name, claim)
			if err := k8s.Create(ctx, class); err != nil && !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
			DeferCleanup(func() { _ = k8s.Delete(ctx, class) })
			eventually(func() string {
				got := &v1alpha1.InfraClass{}
				Expect(k8s.Get(ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
				return readyCondition(got.Status.Conditions)
			}).Should(HavePrefix("True"))
		}
	})

	It("makes the bucket only once the store is Ready, passes the secret key by reference, and deletes the bucket before the store", func() {
		ns := newNamespace("e2e-graph-")
		_, store := sample("minio-standard", "assets")
		_, bucket := sample("minio-bucket", "reports")
		store.Namespace, bucket.Namespace = ns, ns
		Expect(k8s.Create(ctx, bucket)).To(Succeed())
		Expect(k8s.Create(ctx, store)).To(Succeed())

		By("the bucket claim waits for the store")
		eventually(func() string {
			got := &v1alpha1.InfraClaim{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(bucket), got)).To(Succeed())
			if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionInputsReady); c != nil {
				return c.Reason
			}
			return ""
		}).Should(Equal(v1alpha1.ReasonWaitingForUpstream))

		storeClaim, storeRes := claimReady(store)
		bucketClaim, bucketRes := claimReady(bucket)
		Expect(bucketRes.CreationTimestamp.Time).NotTo(BeTemporally("<",
			meta.FindStatusCondition(storeClaim.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime.Time.Add(-time.Second)))

		By("the secret key reaches the bucket's run by reference to the store's connection Secret, and no object holds it")
		storeConn := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "assets-s3"}, storeConn)).To(Succeed())
		Expect(bucketRes.Spec.VariablesFrom).To(ContainElement(v1alpha1.SecretInput{Name: "secret_key",
			SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: ns, Name: "assets-s3", Key: "secret_key"}}))
		for _, obj := range []any{bucketClaim, bucketRes} {
			raw, _ := json.Marshal(obj)
			Expect(string(raw)).NotTo(ContainSubstring(string(storeConn.Data["secret_key"])))
		}
		conn := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reports-s3"}, conn)).To(Succeed())
		Expect(conn.Data).To(HaveKeyWithValue("bucket", []byte("reports")))
		Expect(conn.Data).To(HaveKeyWithValue("endpoint", storeConn.Data["endpoint"]))

		By("a pod with only the bucket claim's Secret writes and reads back an object in the bucket")
		out := s3(ns, "reports-s3", "roundtrip", "graph.txt", "written through a chain of claims")
		Expect(out).To(ContainSubstring(`get   reports/graph.txt: "written through a chain of claims"`))

		By("the store is deleted first: it waits for the bucket claim, and its server stays")
		Expect(k8s.Delete(ctx, storeClaim)).To(Succeed())
		eventually(func() string {
			got := &v1alpha1.InfraClaim{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(store), got)).To(Succeed())
			if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionInUse); c != nil {
				return c.Reason + ": " + c.Message
			}
			return ""
		}).Should(And(HavePrefix(v1alpha1.ReasonInUseByDependents), ContainSubstring("claim "+ns+"/reports")))
		Consistently(func() string {
			got := &v1alpha1.InfraResource{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: storeRes.Name}, got)).To(Succeed())
			return string(got.Status.Phase)
		}, 5*time.Second, time.Second).Should(Equal(string(v1alpha1.ResourceBound)))

		By("the bucket claim is deleted: its resource is destroyed, then the store's")
		Expect(k8s.Delete(ctx, bucketClaim)).To(Succeed())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: bucketRes.Name}})).Should(BeTrue())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: storeRes.Name}})).Should(BeTrue())
		eventually(isGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "minio-" + storeRes.Name}})).Should(BeTrue())
	})
})
