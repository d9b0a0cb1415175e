package lifecycle_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
)

// killProvider sends SIGKILL to the provider plugin processes named binary (a prefix of the
// executable's name, e.g. terraform-provider-kubernetes) of the run in runsDir/<key>: they carry
// procs.EnvWorkspace naming it. Terraform itself is left alone. It returns how many it killed.
func killProvider(key, binary string) int { return signalProvider(key, binary, syscall.SIGKILL) }

// signalProvider sends sig to the processes killProvider would kill and returns how many it reached
// (signal 0: how many there are).
func signalProvider(key, binary string, sig syscall.Signal) int {
	want := []byte(procs.EnvWorkspace + "=" + filepath.Join(runsDir, key))
	entries, _ := os.ReadDir("/proc")
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if !bytes.HasPrefix([]byte(filepath.Base(exe)), []byte(binary)) || !bytes.Contains(env, append(want, 0)) {
			continue
		}
		if syscall.Kill(pid, sig) == nil {
			killed++
		}
	}
	return killed
}

var _ = Describe("A provider that dies mid-create", func() {
	It("leaves the create in doubt: the next plan is held, and nothing is created twice", func() {
		// Issue 32: a provider crashed or OOM-killed mid-create ends Terraform on its own ("Plugin
		// did not respond"), so the create it had started was settled as if the state held it; the
		// next run created it again beside the first.
		s := newScenario()
		name := "crash-" + s.ns
		src, _ := filepath.Abs("testdata/modules/tokenwait")
		res := &v1alpha1.InfraResource{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.InfraResourceSpec{ResourceKind: s.kind, Module: v1alpha1.ModuleSource{Source: src, Version: "v1.0.0"},
				RunInputs:     v1alpha1.RunInputs{KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: "conductor-tf-module-rook-minio"}},
				Variables:     v1alpha1.Variables{"namespace": js(fmt.Sprintf("%q", s.ns)), "label": js(fmt.Sprintf("%q", name))},
				ReclaimPolicy: v1alpha1.ReclaimDelete},
		}
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, name)
		created := func() int {
			list, err := kube.CoreV1().Secrets(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "conductor.io/ledger=" + name})
			Expect(err).NotTo(HaveOccurred())
			return len(list.Items)
		}
		By("the provider has created the Secret and waits for its token; the create is recorded as started")
		Eventually(created, timeout, 100*time.Millisecond).Should(Equal(1))
		Eventually(func() []string { return s.resource(name)().Status.CreatesPending }, timeout, 100*time.Millisecond).
			Should(ConsistOf("module.main.kubernetes_secret_v1.token"))
		Expect(killProvider(name, "terraform-provider-kubernetes")).To(BeNumerically(">", 0), "the kill landed on the run's provider")

		Eventually(syncedReason(s, name), timeout, 200*time.Millisecond).Should(Equal(v1alpha1.ReasonInterruptedCreate))
		Expect(s.resource(name)().Status.PendingPlan).NotTo(BeNil())
		Consistently(created, 5*time.Second, 500*time.Millisecond).Should(Equal(1), "created once")
	})
})
