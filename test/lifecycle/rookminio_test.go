package lifecycle_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

var objectStoreGVK = schema.GroupVersionKind{Group: "minio.rook.io", Version: "v1alpha1", Kind: "ObjectStore"}

var _ = Describe("The rook-minio sample class, end to end", func() {
	// envtest runs no kubelet: the class asks a Rook-style operator (server: rook-objectstore, the
	// fixture CRD) instead of running the MinIO server itself, which test/e2e does on kind.
	It("with server rook-objectstore, creates the namespace, credentials and ObjectStore through the API, fills the connection Secret, and removes them all on delete", func() {
		ctx := context.Background()
		samples, err := harness.LoadSamples(modulesURL)
		Expect(err).NotTo(HaveOccurred())
		var class *v1alpha1.InfraClass
		for i := range samples.Classes {
			if samples.Classes[i].Name == "minio-standard" {
				class = &samples.Classes[i]
			}
		}
		Expect(class).NotTo(BeNil())
		class.Spec.Variables["server"] = js(`"rook-objectstore"`)
		class.Spec.Variables["node_count"] = js("4")
		Expect(class.Spec.Module.Source).To(HavePrefix(modulesURL))
		Expect(k8s.Create(ctx, class)).To(Succeed())
		Eventually(func() string {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			return condition(got.Status.Conditions, v1alpha1.ConditionReady).Reason
		}, timeout, time.Second).Should(Equal(v1alpha1.ReasonValid), "the class resolves its module at the tag")

		s := newScenario()
		var claim *v1alpha1.InfraClaim
		for i := range samples.Claims {
			if samples.Claims[i].Name == "assets" {
				claim = samples.Claims[i].DeepCopy()
			}
		}
		claim.Namespace = s.ns
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		claim, res := s.ready(claim)
		storeNS := "minio-" + res.Name // the sample names the store after the resource

		By("the module's objects are visible through the API")
		ns := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: storeNS}, ns)).To(Succeed())
		creds := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: storeNS, Name: "minio-assets-access-keys"}, creds)).To(Succeed())
		store := &unstructured.Unstructured{}
		store.SetGroupVersionKind(objectStoreGVK)
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: storeNS, Name: "assets"}, store)).To(Succeed())
		nodes, found, err := unstructured.NestedInt64(store.Object, "spec", "scope", "nodeCount")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(nodes).To(Equal(int64(4)))
		Expect(store.Object["spec"]).To(HaveKeyWithValue("credentials", HaveKeyWithValue("name", "minio-assets-access-keys")))

		By("the connection Secret holds the endpoint and the keys; the secret key matches the credentials")
		conn := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "assets-s3"}, conn)).To(Succeed())
		Expect(string(conn.Data["endpoint"])).To(Equal("http://assets." + storeNS + ".svc.cluster.local:9000"))
		Expect(string(conn.Data["access_key"])).To(Equal("minio"))
		Expect(string(conn.Data["bucket"])).To(Equal("assets"))
		Expect(conn.Data["secret_key"]).To(Equal(creds.Data["password"]))
		Expect(res.Status.Outputs).NotTo(HaveKey("secret_key"))
		Expect(res.Spec.Module.Version).To(Equal(harness.ModulesVersion))

		By("deleting the claim removes the objects, the namespace and the state")
		Expect(k8s.Delete(ctx, claim)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(ctx, client.ObjectKey{Namespace: storeNS, Name: "assets"}, store) }), timeout, time.Second).Should(BeTrue())
		Eventually(gone(func() error { return k8s.Get(ctx, client.ObjectKey{Name: storeNS}, &corev1.Namespace{}) }), timeout, time.Second).Should(BeTrue())
		Eventually(gone(func() error { _, err := stateSecret(ctx, res.Name); return err }), timeout).Should(BeTrue())
		Eventually(gone(func() error { return k8s.Get(ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
	})
})
