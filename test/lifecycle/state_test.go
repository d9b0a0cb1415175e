package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// annotate merges one annotation into a resource.
func annotate(s *scenario, name, key, value string) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	Expect(k8s.Patch(s.ctx, &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
}

func setContent(s *scenario, name, content string) {
	got := s.resource(name)()
	got.Spec.Variables["content"] = js(fmt.Sprintf("%q", content))
	Expect(k8s.Update(s.ctx, got)).To(Succeed())
}

func syncedReason(s *scenario, name string) func() string {
	return func() string { return syncedCondition(s.resource(name)()).Reason }
}

func readyAt(s *scenario, name string) {
	Eventually(func() metav1.Condition {
		r := s.resource(name)()
		if r.Status.ObservedGeneration != r.Generation {
			return metav1.Condition{}
		}
		return syncedCondition(r)
	}, timeout, time.Second).Should(HaveField("Status", metav1.ConditionTrue))
}

// stateSecrets lists the Secrets holding a resource's state (the first and its -part-N chunks).
func stateSecrets(s *scenario, res string) []string {
	sfx := statebackend.SuffixFor(res)
	var names []string
	list, err := kube.CoreV1().Secrets(stateNamespace).List(s.ctx, metav1.ListOptions{LabelSelector: "tfstate=true,tfstateSecretSuffix=" + sfx})
	Expect(err).NotTo(HaveOccurred())
	for _, sec := range list.Items {
		names = append(names, sec.Name)
	}
	return names
}

// terraformBinary is the Terraform CLI (>= 1.6 reads chunked kubernetes-backend state), if any.
func terraformBinary() (tfrunner.Binary, bool) {
	bins, err := harness.Binaries(context.Background())
	Expect(err).NotTo(HaveOccurred())
	for _, b := range bins {
		if b.Flavor == tfrunner.Terraform {
			return b, true
		}
	}
	return tfrunner.Binary{}, false
}

var _ = Describe("State the controller serves", func() {
	It("a state over 4 MiB of gzip: Ready, kept in -part-N chunks, and read by terraform's kubernetes backend", func() {
		// Plain (Terraform has no state encryption; OpenTofu's kubernetes backend reads no chunks).
		plainStates.Store(true)
		DeferCleanup(func() { plainStates.Store(false) })
		s := newScenario()
		big, _ := filepath.Abs("testdata/modules/big")
		res := &v1alpha1.InfraResource{
			ObjectMeta: metav1.ObjectMeta{Name: "big-" + s.ns},
			Spec: v1alpha1.InfraResourceSpec{ResourceKind: s.kind, Module: v1alpha1.ModuleSource{Source: big, Version: "v1"},
				Variables: v1alpha1.Variables{}, ReclaimPolicy: v1alpha1.ReclaimDelete},
		}
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		readyAt(s, res.Name)
		Expect(s.resource(res.Name)().Status.Outputs).To(HaveKeyWithValue("instances", js("40")))

		names := stateSecrets(s, res.Name)
		Expect(len(names)).To(BeNumerically(">=", 5), "over 4 MiB of gzip in 1 MiB Secrets: %v", names)
		total := 0
		for _, n := range names {
			sec, err := kube.CoreV1().Secrets(stateNamespace).Get(s.ctx, n, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(len(sec.Data["tfstate"])).To(BeNumerically("<=", 1<<20))
			total += len(sec.Data["tfstate"])
			Expect(n).To(Or(Equal(statebackend.SecretName("default", statebackend.SuffixFor(res.Name))),
				MatchRegexp("^"+statebackend.SecretName("default", statebackend.SuffixFor(res.Name))+`-part-\d+$`)))
		}
		Expect(total).To(BeNumerically(">", 4<<20))

		tf, ok := terraformBinary()
		if !ok {
			Skip("no terraform on PATH: the chunked layout was checked, terraform's reading of it was not")
		}
		dir := GinkgoT().TempDir()
		root, _ := json.Marshal(map[string]any{"terraform": map[string]any{"backend": map[string]any{"kubernetes": map[string]any{
			"secret_suffix": statebackend.SuffixFor(res.Name), "namespace": stateNamespace, "config_path": env.Kubeconfig}}}})
		Expect(os.WriteFile(filepath.Join(dir, "main.tf.json"), root, 0o600)).To(Succeed())
		run := func(args ...string) string {
			cmd := exec.Command(tf.Path, args...)
			cmd.Dir = dir
			for k, v := range tfEnv {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			return string(out)
		}
		run("init", "-input=false", "-no-color")
		list := strings.Fields(run("state", "list", "-no-color"))
		Expect(list).To(HaveLen(40))
		Expect(list).To(ContainElement("module.main.random_bytes.this[39]"))
		Expect(k8s.Delete(s.ctx, s.resource(res.Name)())).To(Succeed())
		Eventually(func() []string { return stateSecrets(s, res.Name) }, timeout, time.Second).Should(BeEmpty())
	})

	It("a state write the API server rejects: nothing runs until the state is saved, then it converges with nothing created twice", func() {
		s := newScenario()
		res := fileResource(s, "rejected-"+s.ns, "v1")
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		readyAt(s, res.Name)
		serial := s.resource(res.Name)().Status.State.Serial

		By("an admission policy rejects every write of the state Secrets")
		prefix := statebackend.SecretName("default", statebackend.SuffixFor(res.Name))
		policy := &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "reject-" + s.ns},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr.To(admissionv1.Fail),
				MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
					}}}},
				Validations: []admissionv1.Validation{{Expression: fmt.Sprintf("!object.metadata.name.startsWith(%q)", prefix),
					Message: "state writes are rejected by the test"}},
			},
		}
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reject-" + s.ns},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
				ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
		}
		Expect(k8s.Create(s.ctx, policy)).To(Succeed())
		Expect(k8s.Create(s.ctx, binding)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(context.Background(), binding); _ = k8s.Delete(context.Background(), policy) })
		// The policy is in force once a direct write is refused.
		Eventually(func() error {
			_, err := kube.CoreV1().Secrets(stateNamespace).Create(s.ctx, probeSecret(prefix+"-probe"), metav1.CreateOptions{})
			return err
		}, 30*time.Second, 500*time.Millisecond).Should(MatchError(ContainSubstring("rejected by the test")))

		By("an apply changes the file, and its state cannot be saved")
		setContent(s, res.Name, "v2")
		Eventually(func() string { return fileContent(filepath.Join(s.dir, res.Name+".txt")) }, timeout, time.Second).Should(Equal("v2"))
		Eventually(syncedReason(s, res.Name), timeout, time.Second).Should(Equal(v1alpha1.ReasonStateNotSaved))
		_, pending := stateServer.Pending(statebackend.SuffixFor(res.Name))
		Expect(pending).To(BeTrue(), "the server keeps the state it received")
		before := runs(res.Name)
		Consistently(func() int { return runs(res.Name) }, 5*time.Second, time.Second).Should(Equal(before), "no plan or apply while the state is not saved")

		By("writes are accepted again: the kept state is saved first, and the next run changes nothing")
		Expect(k8s.Delete(s.ctx, binding)).To(Succeed())
		Expect(k8s.Delete(s.ctx, policy)).To(Succeed())
		Eventually(func() *v1alpha1.InfraResource { return s.resource(res.Name)() }, timeout, time.Second).Should(And(
			WithTransform(syncedCondition, HaveField("Status", metav1.ConditionTrue)),
			HaveField("Status.LastRun.Summary", Equal(&v1alpha1.PlanSummary{})),
			HaveField("Status.State.Serial", BeNumerically(">", serial))))
		Expect(eventReasons(s, res.Name)).To(ContainElement(HavePrefix(v1alpha1.ReasonStateSaved)))
		Expect(fileContent(filepath.Join(s.dir, res.Name+".txt"))).To(Equal("v2"))
	})

	It("keeps the last versions, restores one by annotation, and never plans a resource that was applied from empty state", func() {
		s := newScenario()
		res := fileResource(s, "history-"+s.ns, "v1")
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		readyAt(s, res.Name)
		first := s.resource(res.Name)().Status.State.Serial
		setContent(s, res.Name, "v2")
		readyAt(s, res.Name)
		second := s.resource(res.Name)().Status.State.Serial
		Expect(second).To(BeNumerically(">", first))
		handle := statebackend.NewStore(kube, stateNamespace).For(statebackend.SuffixFor(res.Name))
		versions, err := handle.History(s.ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(versions).To(ContainElement(HaveField("Serial", first)))

		By("restoring the first version")
		annotate(s, res.Name, v1alpha1.AnnotationRestoreState, strconv.FormatInt(first, 10))
		Eventually(func() []string { return eventReasons(s, res.Name) }, timeout, time.Second).Should(ContainElement(HavePrefix(v1alpha1.ReasonStateRestored)))
		Eventually(func() map[string]string { return s.resource(res.Name)().Annotations }, timeout, time.Second).ShouldNot(HaveKey(v1alpha1.AnnotationRestoreState))
		versions, err = handle.History(s.ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(versions).To(ContainElement(HaveField("Serial", second)), "the replaced version is kept: a restore can be undone")

		By("a restore of a serial that is not in the history says so and runs nothing")
		annotate(s, res.Name, v1alpha1.AnnotationRestoreState, "999")
		Eventually(syncedReason(s, res.Name), timeout, time.Second).Should(Equal(v1alpha1.ReasonStateRestoreFailed))
		annotate(s, res.Name, v1alpha1.AnnotationRestoreState, "")
		Expect(k8s.Patch(s.ctx, &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: res.Name}},
			client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+v1alpha1.AnnotationRestoreState+`":null}}}`)))).To(Succeed())
		readyAt(s, res.Name)

		By("the state disappears: the resource stops instead of creating everything again")
		Expect(statebackend.NewStore(kube, stateNamespace).For(statebackend.SuffixFor(res.Name)).Delete(s.ctx)).To(Succeed())
		setContent(s, res.Name, "v3")
		Eventually(syncedReason(s, res.Name), timeout, time.Second).Should(Equal(v1alpha1.ReasonStateMissing))
		count := runs(res.Name)
		Consistently(func() int { return runs(res.Name) }, 4*time.Second, time.Second).Should(Equal(count))
		Expect(fileContent(filepath.Join(s.dir, res.Name+".txt"))).NotTo(Equal("v3"))

		By("start-fresh lets it plan from empty state once")
		annotate(s, res.Name, v1alpha1.AnnotationStartFresh, "true")
		Eventually(func() string { return fileContent(filepath.Join(s.dir, res.Name+".txt")) }, timeout, time.Second).Should(Equal("v3"))
		readyAt(s, res.Name)
		Eventually(func() map[string]string { return s.resource(res.Name)().Annotations }, timeout, time.Second).ShouldNot(HaveKey(v1alpha1.AnnotationStartFresh))
	})
})

func probeSecret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: stateNamespace}}
}
