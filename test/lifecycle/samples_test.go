package lifecycle_test

import (
	"bytes"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// applySample creates every object of a file in config/samples, its module sources pointed at the
// published modules, as `kubectl create -f` would.
func applySample(s *scenario, file string) {
	data, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "config", "samples", file))
	Expect(err).NotTo(HaveOccurred())
	data = bytes.ReplaceAll(data, []byte(harness.SamplesRemote), []byte(modulesURL))
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			Expect(err.Error()).To(Equal("EOF"))
			return
		}
		if len(obj.Object) == 0 {
			continue
		}
		Expect(k8s.Create(s.ctx, obj)).To(Succeed(), "%s %s", obj.GetKind(), obj.GetName())
	}
}

var _ = Describe("The worked example of the README", func() {
	It("imports hand-made infrastructure, binds it, and round-trips Retain → orphan → adopt", func() {
		s := newScenario()
		applySample(s, "import_existing_minio.yaml")
		claim := &v1alpha1.InfraClaim{}
		claim.Namespace, claim.Name = "default", "legacy-assets"
		claim, res := s.ready(claim)
		Expect(res.Name).To(Equal("legacy-minio"))
		for _, imp := range res.Status.Imports {
			Expect(imp.Result).To(Equal("Imported"), imp.Address)
		}
		conn := &corev1.Secret{}
		// The bind changes the resource's claimRef; its next run writes the claim's connection Secret.
		Eventually(func() error {
			return k8s.Get(s.ctx, client.ObjectKey{Namespace: "default", Name: "legacy-assets-s3"}, conn)
		}, timeout).Should(Succeed())
		Expect(string(conn.Data["secret_key"])).To(Equal("change-me-legacy-secret-key"))

		By("Retain: deleting the claim keeps the store; deleting the resource orphans its state")
		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(s.resource(res.Name), timeout).Should(HaveField("Status.Phase", v1alpha1.ResourceReleased))
		Expect(k8s.Delete(s.ctx, s.resource(res.Name)())).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		orphan, err := stateSecret(s.ctx, res.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(orphan.Labels).To(HaveKeyWithValue(statebackend.LabelOrphanedFrom, res.Name))
		Expect(orphan.Name).To(Equal("tfstate-default-legacy-minio"), "the name the adopt sample uses")
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: "minio-legacy", Name: "legacy"}, objectStore())).To(Succeed())

		By("a new resource adopts the orphaned state and plans zero changes")
		applySample(s, "adopt_orphaned_state.yaml")
		Eventually(func() *v1alpha1.RunStatus { return s.resource("legacy-minio-again")().Status.LastRun }, timeout, time.Second).Should(
			And(HaveField("Result", v1alpha1.RunSucceeded), HaveField("Operation", "plan"), HaveField("Summary", Equal(&v1alpha1.PlanSummary{}))))
		Expect(s.resource("legacy-minio-again")().Status.State.AdoptedFrom).To(Equal(orphan.Name))
	})
})

func objectStore() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(objectStoreGVK)
	return u
}
