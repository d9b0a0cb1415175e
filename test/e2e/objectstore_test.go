//go:build e2e

package e2e_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// s3ClientImage is the module's client_image default, built by hack/workload-images.sh and loaded
// into the cluster by hack/test-e2e.sh.
const s3ClientImage = "conductor-tf/s3client:v0.1.0"

// s3 runs cmd/s3client in a pod of namespace ns that mounts only the Secret secretName (at /conn)
// and no ServiceAccount token, and returns its output; the spec fails unless the pod succeeds.
func s3(ns, secretName string, args ...string) string {
	phase, out := s3Run(ns, secretName, args...)
	Expect(phase).To(Equal(corev1.PodSucceeded), "s3client %v: %s", args, out)
	return out
}

// s3Run is s3 that returns how the pod ended (Succeeded or Failed) with its output.
func s3Run(ns, secretName string, args ...string) (corev1.PodPhase, string) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "s3client-", Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65534),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "s3client", Image: s3ClientImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Args:         append([]string{args[0], "--secret-dir", "/conn"}, args[1:]...),
				VolumeMounts: []corev1.VolumeMount{{Name: "conn", MountPath: "/conn", ReadOnly: true}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{{Name: "conn", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName}}}},
		},
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	var phase corev1.PodPhase
	Eventually(func() corev1.PodPhase {
		got := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), got)).To(Succeed())
		phase = got.Status.Phase
		return phase
	}, 2*time.Minute, time.Second).Should(Or(Equal(corev1.PodSucceeded), Equal(corev1.PodFailed)))
	logs, err := kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).Stream(ctx)
	Expect(err).NotTo(HaveOccurred())
	defer logs.Close()
	var out bytes.Buffer
	_, _ = io.Copy(&out, logs)
	GinkgoWriter.Printf("s3client %s (%s):\n%s", strings.Join(args, " "), phase, out.String())
	return phase, out.String()
}

// claimReady waits until the claim is Ready and returns it with its resource.
func claimReady(claim *v1alpha1.InfraClaim) (*v1alpha1.InfraClaim, *v1alpha1.InfraResource) {
	start := time.Now()
	got := &v1alpha1.InfraClaim{}
	eventually(func() string {
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
		return readyCondition(got.Status.Conditions)
	}).Should(HavePrefix("True"))
	GinkgoWriter.Printf("claim %s/%s Ready in %s\n", claim.Namespace, claim.Name, time.Since(start).Round(time.Second))
	res := &v1alpha1.InfraResource{}
	Expect(k8s.Get(ctx, client.ObjectKey{Name: got.Status.ResourceName}, res)).To(Succeed())
	return got, res
}

// storeVolumes lists the PersistentVolumes bound to claims of namespace ns.
func storeVolumes(ns string) []string {
	list, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, pv := range list.Items {
		if pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
			names = append(names, pv.Name)
		}
	}
	return names
}

func isGone(obj client.Object) func() bool {
	return func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)) }
}

var _ = Describe("The sample rook-minio class, in the cluster: an object store you can write to", Ordered, func() {
	var class *v1alpha1.InfraClass
	BeforeAll(func() {
		class, _ = sample("minio-standard", "assets")
		Expect(k8s.Create(ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, class) })
		eventually(func() string {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			return readyCondition(got.Status.Conditions)
		}).Should(HavePrefix("True"), "the manager's pod fetches the module over git")
	})

	It("serves S3 through the claim's connection Secret; deleting the claim removes the server, its volume and the Secret", func() {
		_, claim := sample("minio-standard", "assets")
		claim.Namespace = newNamespace("e2e-s3-")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		got, res := claimReady(claim)
		Expect(res.Status.LastRun.Controller).To(HavePrefix(deployment), "the run was the manager pod's")
		storeNS := "minio-" + res.Name // the sample names the store after the resource
		conn := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: "assets-s3"}, conn)).To(Succeed())
		Expect(conn.Data).To(HaveKeyWithValue("endpoint", []byte("http://assets."+storeNS+".svc.cluster.local:9000")))
		Expect(conn.Data).To(HaveKeyWithValue("bucket", []byte("assets")))
		Expect(conn.Data).To(HaveKey("access_key"))
		Expect(conn.Data).To(HaveKey("secret_key"))
		Expect(storeVolumes(storeNS)).To(HaveLen(1), "the server's volume was provisioned from the claim's 8Gi")

		By("the state is encrypted with the key the manager created (the manifests' default)")
		state := kubectl("get", "secret", "-n", system, res.Status.State.SecretName, "-o", "jsonpath={.data.tfstate}")
		Expect(gunzipBase64(state)).To(ContainSubstring(`"encryption_version"`))
		Expect(gunzipBase64(state)).NotTo(ContainSubstring(string(conn.Data["secret_key"])))
		Expect(kubectl("get", "secret", "-n", system, "conductor-tf-state-key", "-o", "name")).To(ContainSubstring("conductor-tf-state-key"))

		By("a pod with only the connection Secret writes, lists and reads back an object")
		out := s3(claim.Namespace, "assets-s3", "roundtrip", "hello.txt", "written through the claim")
		Expect(out).To(ContainSubstring(`get   assets/hello.txt: "written through the claim"`))

		By("deleting the claim: the server, its volume, the namespace, the state and the connection Secret go")
		Expect(k8s.Delete(ctx, got)).To(Succeed())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: res.Name}})).Should(BeTrue())
		eventually(isGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storeNS}})).Should(BeTrue())
		eventually(func() []string { return storeVolumes(storeNS) }).Should(BeEmpty(), "the volume is deleted with its claim")
		eventually(isGone(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: "assets-s3"}})).Should(BeTrue())
		Expect(strings.TrimSpace(kubectl("get", "secrets", "-n", system, "-l", "conductor.io/resource="+res.Name, "-o", "name"))).To(BeEmpty())
	})

	It("with Retain keeps the data: a claim of the resource that adopts the orphaned state reads the object written before", func() {
		retain := class.DeepCopy()
		retain.ObjectMeta = metav1.ObjectMeta{Name: "minio-retain"}
		retain.Spec.Default = false
		retain.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain
		Expect(k8s.Create(ctx, retain)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, retain) })
		_, claim := sample("minio-standard", "assets")
		claim.Namespace = newNamespace("e2e-retain-")
		claim.Spec.ClassName = retain.Name
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		got, old := claimReady(claim)
		storeNS := "minio-" + old.Name
		s3(claim.Namespace, "assets-s3", "put", "kept.txt", "written before the claim was deleted")

		By("deleting the claim and its Released resource keeps the server and orphans the state")
		Expect(k8s.Delete(ctx, got)).To(Succeed())
		eventually(func() v1alpha1.ResourcePhase {
			r := &v1alpha1.InfraResource{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(old), r)).To(Succeed())
			return r.Status.Phase
		}).Should(Equal(v1alpha1.ResourceReleased))
		Expect(k8s.Delete(ctx, old)).To(Succeed())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: old.Name}})).Should(BeTrue())
		orphan := statebackend.SecretName("default", statebackend.SuffixFor(old.Name))
		Expect(kubectl("get", "secret", orphan, "-n", system, "-o", "jsonpath={.metadata.labels.conductor\\.io/orphaned-from}")).To(Equal(old.Name))
		Expect(kubectl("get", "deployment", "assets", "-n", storeNS, "-o", "name")).To(ContainSubstring("assets"), "Retain keeps the server")
		Expect(storeVolumes(storeNS)).To(HaveLen(1), "Retain keeps the volume")

		By("a resource adopts the orphaned state and a new claim binds to it")
		adopter := &v1alpha1.InfraResource{
			ObjectMeta: metav1.ObjectMeta{Name: old.Name + "-again"},
			Spec: v1alpha1.InfraResourceSpec{ResourceKind: old.Spec.ResourceKind, ClassRef: old.Spec.ClassRef, Module: old.Spec.Module, Variables: old.Spec.Variables,
				RunInputs: v1alpha1.RunInputs{KubernetesAccess: old.Spec.KubernetesAccess}, Capacity: old.Spec.Capacity, Capabilities: old.Spec.Capabilities,
				ReclaimPolicy: v1alpha1.ReclaimDelete, AdoptState: orphan},
		}
		Expect(k8s.Create(ctx, adopter)).To(Succeed())
		again := claim.DeepCopy()
		again.ObjectMeta = metav1.ObjectMeta{Name: "assets", Namespace: claim.Namespace}
		again.Spec.ResourceName = adopter.Name
		Expect(k8s.Create(ctx, again)).To(Succeed())
		again, res := claimReady(again)
		Expect(res.Status.State.AdoptedFrom).To(Equal(orphan))
		out := s3(claim.Namespace, "assets-s3", "get", "kept.txt")
		Expect(out).To(Equal("written before the claim was deleted\n"))

		By("the adopting resource reclaims with Delete: everything goes")
		Expect(k8s.Delete(ctx, again)).To(Succeed())
		eventually(isGone(&v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: adopter.Name}})).Should(BeTrue())
		eventually(isGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storeNS}})).Should(BeTrue())
		eventually(func() []string { return storeVolumes(storeNS) }).Should(BeEmpty())
		fmt.Fprintf(GinkgoWriter, "orphan %s adopted by %s and reclaimed\n", orphan, adopter.Name)
	})
})

// gunzipBase64 decodes a Secret's base64 value (kubectl's jsonpath of .data) and gunzips it.
func gunzipBase64(b64 string) string {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	Expect(err).NotTo(HaveOccurred())
	r, err := gzip.NewReader(bytes.NewReader(raw))
	Expect(err).NotTo(HaveOccurred())
	out, err := io.ReadAll(r)
	Expect(err).NotTo(HaveOccurred())
	return string(out)
}
