package lifecycle_test

// Issue 22: a reconcile writes the resource's status once, at its end, from a scope. The outcome
// of a run must survive whatever else was written to the object while the run went on.

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

var _ = Describe("One status write per reconcile", func() {
	It("keeps a run's outcome when the resource's metadata is updated while the run goes on", func() {
		s := newScenario()
		res, ledger := ledgerResource(s, "scope-"+s.ns, 4)
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		DeferCleanup(deleteInBackground, s, res.Name)
		Eventually(func() int { return ledgerLines(ledger) }, timeout, 100*time.Millisecond).Should(Equal(1), "the create is under way")
		running := s.resource(res.Name)()
		Expect(running.Status.LastRun).NotTo(BeNil())
		Expect(running.Status.LastRun.Result).To(Equal(v1alpha1.RunRunning))

		By("an Update of labels and annotations (a new resourceVersion) while the create runs")
		// The run's own status writes (the create's checkpoint lands as its provisioner starts)
		// may come between the read and the Update: read again on a conflict, as kubectl does.
		Eventually(func() error {
			running = s.resource(res.Name)()
			running.Labels = map[string]string{"team": "payments"}
			running.Annotations = map[string]string{"example.org/owner": "someone"}
			return k8s.Update(s.ctx, running)
		}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		Expect(running.ResourceVersion).NotTo(Equal(res.ResourceVersion))

		readyAt(s, res.Name)
		got := s.resource(res.Name)()
		Expect(got.Status.LastRun.ID).To(Equal(running.Status.LastRun.ID), "the run recorded Running is the one whose outcome is written")
		Expect(got.Status.LastRun.Result).To(Equal(v1alpha1.RunSucceeded))
		Expect(got.Status.LastRun.CompletionTime).NotTo(BeNil())
		Expect(got.Status.Phase).To(Equal(v1alpha1.ResourceAvailable))
		Expect(got.Status.Outputs).To(HaveKey("name"))
		Expect(got.Labels).To(HaveKeyWithValue("team", "payments"), "the status write does not undo the metadata write")
		Expect(got.Annotations).To(HaveKeyWithValue("example.org/owner", "someone"))
		Consistently(func() int { return ledgerLines(ledger) }, 3*time.Second, 500*time.Millisecond).Should(Equal(1), "the outcome was not lost, so nothing ran again")
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, got)).To(Succeed())
		Expect(got.Status.LastRun.ID).To(Equal(running.Status.LastRun.ID))
	})
})
