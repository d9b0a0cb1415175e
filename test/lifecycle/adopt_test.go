package lifecycle_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// Issue 48 item 4: a way in. OpenTofu applies the module "one" as its root module with Terraform's
// kubernetes backend in another namespace, as tofu-controller runs a Terraform object; `kubectl
// conductor adopt terraform/NAME` brings that state under a resource, which plans no change.
var _ = Describe("Adopting another controller's state", func() {
	It("adopts a tofu-controller Terraform's state (copied, moved under module.main), plans no change, and leaves the original labelled", func() {
		s := newScenario()
		module, _ := filepath.Abs(filepath.Join("..", "..", "internal", "tfrunner", "testdata", "modules", "one"))

		By("OpenTofu applies the module as root, state in tfstate-default-legacy of the app's namespace")
		root := GinkgoT().TempDir()
		src, err := os.ReadFile(filepath.Join(module, "main.tf"))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(root, "main.tf"), src, 0o600)).To(Succeed())
		backend, _ := json.Marshal(map[string]any{"terraform": map[string]any{"backend": map[string]any{"kubernetes": map[string]any{
			"secret_suffix": "legacy", "namespace": s.ns, "config_path": env.Kubeconfig}}}})
		Expect(os.WriteFile(filepath.Join(root, "backend.tf.json"), backend, 0o600)).To(Succeed())
		tofu := func(args ...string) {
			cmd := exec.Command(realBinary.Path, args...)
			cmd.Dir = root
			for k, v := range tfEnv {
				if k != "TF_PLUGIN_CACHE_DIR" {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
			}
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
		}
		tofu("init", "-input=false", "-no-color")
		tofu("apply", "-auto-approve", "-input=false", "-no-color", "-var", "prefix=legacy")
		original, err := kube.CoreV1().Secrets(s.ns).Get(s.ctx, "tfstate-default-legacy", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("a tofu-controller Terraform object names it (its default suffix is its name)")
		tf := &unstructured.Unstructured{}
		tf.SetAPIVersion("infra.contrib.fluxcd.io/v1alpha2")
		tf.SetKind("Terraform")
		tf.SetNamespace(s.ns)
		tf.SetName("legacy")
		tf.Object["spec"] = map[string]any{"path": "./one", "vars": []any{map[string]any{"name": "prefix", "value": "legacy"}}}
		Expect(k8s.Create(s.ctx, tf)).To(Succeed())
		class := &v1alpha1.InfraClass{
			ObjectMeta: metav1.ObjectMeta{Name: "adopt-" + s.ns},
			Spec: v1alpha1.InfraClassSpec{ResourceKind: s.kind, Module: v1alpha1.ModuleSource{Source: module, Version: "v1"},
				Variables: v1alpha1.Variables{"prefix": js(`"${claim.name}"`)}},
		}
		Expect(k8s.Create(s.ctx, class)).To(Succeed())

		plugin, err := harness.BuildPlugin(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		name := "adopted-" + s.ns
		adopt := func() (string, error) {
			out, err := exec.Command(plugin, "adopt", "terraform/legacy", "-n", s.ns, "--class", class.Name, "--name", name,
				"--kubeconfig", env.Kubeconfig, "--controller-namespace", stateNamespace).CombinedOutput()
			return string(out), err
		}
		setSpec := func(field string, value any) {
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(tf), tf)).To(Succeed())
			Expect(unstructured.SetNestedField(tf.Object, value, "spec", field)).To(Succeed())
			Expect(k8s.Update(s.ctx, tf)).To(Succeed())
		}
		refused := func(why string) {
			out, err := adopt()
			Expect(err).To(HaveOccurred(), out)
			Expect(out).To(ContainSubstring(why))
			Expect(k8s.Get(s.ctx, client.ObjectKey{Name: name}, &v1alpha1.InfraResource{})).To(Satisfy(apierrors.IsNotFound), "nothing created")
		}

		By("issue 65 item 6: adopt refuses a state its old controller still manages, saying which")
		refused("terraform/legacy is not suspended")
		setSpec("suspend", true)
		setSpec("destroyResourcesOnDeletion", true)
		refused("destroyResourcesOnDeletion: true")
		setSpec("destroyResourcesOnDeletion", false)
		// OpenTofu's apply left the backend's Lease with no holder; a run of the old controller holds it.
		holder := "tofu-controller-runner"
		lock := &coordinationv1.Lease{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: statebackend.LeaseName("default", "legacy")}, lock)).To(Succeed())
		Expect(ptr.Deref(lock.Spec.HolderIdentity, "")).To(BeEmpty())
		lock.Spec.HolderIdentity = &holder
		Expect(k8s.Update(s.ctx, lock)).To(Succeed())
		refused(`is locked (Lease ` + s.ns + `/lock-tfstate-default-legacy, holder "tofu-controller-runner")`)
		lock.Spec.HolderIdentity = nil // Terraform's unlock clears the holder and keeps the Lease
		Expect(k8s.Update(s.ctx, lock)).To(Succeed())

		By("kubectl conductor adopt terraform/legacy creates the resource; it adopts the state and plans no change")
		out, err := adopt()
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Created resource " + name))
		Eventually(func() v1alpha1.ResourcePhase { return s.resource(name)().Status.Phase }, timeout, time.Second).Should(Equal(v1alpha1.ResourceAvailable))
		res := s.resource(name)()
		Expect(res.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimRetain))
		Expect(string(res.Spec.Variables["prefix"].Raw)).To(Equal(`"legacy"`))
		// With state from the start the run plans first (the destructive-change guard's saved plan);
		// a plan of no change is the whole run.
		Expect(res.Status.LastRun).To(And(HaveField("Operation", BeElementOf("plan", "apply")), HaveField("Result", v1alpha1.RunSucceeded)))
		if sum := res.Status.LastRun.Summary; sum != nil {
			Expect(*sum).To(Equal(v1alpha1.PlanSummary{}), "no change: the random_pet adopted, not created again")
		}
		Expect(res.Status.State.AdoptedFrom).NotTo(BeEmpty())

		By("the original state is untouched but labelled; the pet is the one OpenTofu made")
		after, err := kube.CoreV1().Secrets(s.ns).Get(s.ctx, "tfstate-default-legacy", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(after.Data).To(Equal(original.Data))
		Expect(after.Labels).To(HaveKeyWithValue(statebackend.LabelAdoptedBy, name))
		var outputs map[string]string
		Expect(json.Unmarshal(must(json.Marshal(res.Status.Outputs)), &outputs)).To(Succeed())
		Expect(outputs["name"]).To(HavePrefix("legacy-"))

		By("adopting again refuses: the name is taken")
		out, err = adopt()
		Expect(err).To(HaveOccurred())
		Expect(out).To(ContainSubstring("already exists"))
		Expect(k8s.Delete(s.ctx, &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: name}, &v1alpha1.InfraResource{}) }), timeout, time.Second).Should(BeTrue())
	})
})

func must(b []byte, err error) []byte {
	Expect(err).NotTo(HaveOccurred())
	return b
}
