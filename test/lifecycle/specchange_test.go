package lifecycle_test

import (
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// tokenWaiter is a resource of testdata/modules/tokenwait: its create waits inside the provider
// until fillTokens gives its Secret a token.
func tokenWaiter(s *scenario, name string) *v1alpha1.InfraResource {
	src, _ := filepath.Abs("testdata/modules/tokenwait")
	return &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: s.kind, Module: v1alpha1.ModuleSource{Source: src, Version: "v1.0.0"},
			RunInputs:     v1alpha1.RunInputs{KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: "conductor-tf-module-rook-minio"}},
			Variables:     v1alpha1.Variables{"namespace": js(fmt.Sprintf("%q", s.ns)), "label": js(fmt.Sprintf("%q", name))},
			ReclaimPolicy: v1alpha1.ReclaimDelete},
	}
}

// fillTokens gives every Secret of the tokenWaiter name a token: its create ends.
func fillTokens(s *scenario, name string) {
	list, err := kube.CoreV1().Secrets(s.ns).List(s.ctx, metav1.ListOptions{LabelSelector: "conductor.io/ledger=" + name})
	Expect(err).NotTo(HaveOccurred())
	for i := range list.Items {
		sec := &list.Items[i]
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data["token"] = []byte("filled-by-the-spec")
		_, err := kube.CoreV1().Secrets(s.ns).Update(s.ctx, sec, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
}

// Issue 65 item 5, and the CI failure of stop 73 (modules_test.go: a retry of a failed upgrade was
// recorded as the next version's failure). A status write during a run (here the run's start,
// after it waited in line) loaded the newer generation into the reconcile's copy, and the outcome
// of the run of the older spec was credited to the newer one: observedGeneration 2 with the file
// still holding v1, and no run of v2 until a drift check.
var _ = Describe("A spec edited while its run waits in line", func() {
	It("is not recorded as applied by the run of the spec before it, and is applied next", func() {
		s := newScenario()
		By("both of the pool's runs wait inside a create, so the next run waits in line")
		var blockers []string
		for i := range maxRuns {
			b := tokenWaiter(s, fmt.Sprintf("block%d-%s", i, s.ns))
			Expect(k8s.Create(s.ctx, b)).To(Succeed())
			DeferCleanup(deleteInBackground, s, b.Name)
			blockers = append(blockers, b.Name)
		}
		for _, b := range blockers {
			Eventually(ledger(s, b), timeout, 100*time.Millisecond).Should(Equal(1))
		}
		res := fileResource(s, "edited-"+s.ns, "v1")
		path := filepath.Join(s.dir, res.Name+".txt")
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, res.Name)
		Eventually(syncedReason(s, res.Name), timeout, 100*time.Millisecond).Should(Equal(v1alpha1.ReasonWaitingForRunner))

		By("its spec moves to v2 while it waits; then the creates before it end")
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			r := s.resource(res.Name)()
			r.Spec.Variables["content"] = js(`"v2"`)
			return k8s.Update(s.ctx, r)
		})).To(Succeed())
		for _, b := range blockers {
			fillTokens(s, b)
		}

		By("generation 2 is said applied only once the file holds v2, and it is applied without waiting for a drift check")
		credited := func() string {
			r := &v1alpha1.InfraResource{}
			Expect(k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, r)).To(Succeed())
			content := fileContent(path) // read after status: a v2 apply writes the file first
			if r.Status.ObservedGeneration >= 2 {
				Expect(content).To(Equal("v2"), "observedGeneration %d while the file holds %q", r.Status.ObservedGeneration, content)
				return "applied v2"
			}
			return fmt.Sprintf("generation %d applied", r.Status.ObservedGeneration)
		}
		Eventually(credited, timeout, 50*time.Millisecond).Should(Equal("applied v2"))
		lr := s.resource(res.Name)().Status.LastRun
		Expect(lr.Generation).To(Equal(int64(2)))
		Expect(lr.Operation).To(Equal("apply"))
	})
})
