//go:build e2e

package e2e_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// eventNotes are the notes of the events of reason about the object named name.
func eventNotes(name, reason string) []string {
	list := &eventsv1.EventList{}
	Expect(k8s.List(ctx, list)).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// Issue 46 items 1 and 7: the leader dies (SIGKILL) while a run on a runner pod creates; the
// runner freezes the run and resumes it on the replica that leads next, which adopts it. Before,
// the new leader answered the resume NotFound and the runner killed the run: its creates were in
// doubt, resolved or held, and the apply ran again as a new run.
//
// It was Pending (stop 65), lost to a race adoption did not decide: the runner killed its frozen
// run half the fence grace after its lease ran out, and its resumes reached the next leader only
// when the Service happened to pick it. Now (issue 64 item 4) a standby's refusal names the leader,
// where the resume goes next, and the runner keeps the run frozen for the fence grace less
// KillLatency: killed 33 s after the leader's death at the soonest, later than the 26.4 s a
// takeover takes at most (runners.CheckTakeover).
var _ = Describe("The leader SIGKILLed mid-create on a runner pool of 2", Ordered, func() {
	const pool, sa = "e2e-adopt", "e2e-adopt-runner"

	BeforeAll(func() {
		account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: sa}}
		Expect(k8s.Create(ctx, account)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, account) })
		p := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: pool},
			Spec: v1alpha1.InfraRunnerPoolSpec{Replicas: ptr.To[int32](2), Concurrency: 1, ServiceAccountName: sa}}
		Expect(k8s.Create(ctx, p)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, p) })
		kubectl("-n", system, "scale", "deployment/"+deployment, "--replicas=2")
		kubectl("-n", system, "rollout", "status", "deployment/"+deployment, "--timeout=5m")
		DeferCleanup(func() {
			kubectl("-n", system, "scale", "deployment/"+deployment, "--replicas=1")
			kubectl("-n", system, "rollout", "status", "deployment/"+deployment, "--timeout=5m")
		})
		waitConnected(p, 2)
	})

	It("the next leader adopts the run: the same run finishes, each object created once, no hold, no lock", func() {
		const kind = "E2EAdopt"
		ledgerClass("e2e-adopt", kind, pool)
		claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace("e2e-adopt-"), Name: "app"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: kind}}
		Expect(k8s.Create(ctx, claim)).To(Succeed())

		var run, leaderPod string
		eventually(func() bool {
			res := boundResource(claim)
			if res == nil || len(res.Status.CreatesPending) == 0 || res.Status.LastRun == nil || res.Status.LastRun.Result != v1alpha1.RunRunning {
				return false
			}
			run, leaderPod = res.Status.LastRun.ID, res.Status.LastRun.Controller
			return true
		}).Should(BeTrue(), "the slow create is under way on a runner")
		pids := killManager(leaderPod)
		Expect(pids).NotTo(BeEmpty(), "no manager process of pod %s on the node", leaderPod)
		killed := time.Now()
		GinkgoWriter.Printf("killed the leader %s (pid %s) with SIGKILL while run %s created on the pool\n", leaderPod, pids, run)

		held := map[string]string{}
		eventually(func() string {
			if res := boundResource(claim); res != nil && (res.Status.PendingPlan != nil || syncedReason(res) == v1alpha1.ReasonInterruptedCreate) {
				held[res.Name] = syncedReason(res)
			}
			got := &v1alpha1.InfraClaim{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
			return readyCondition(got.Status.Conditions)
		}).Should(HavePrefix("True"))
		res := boundResource(claim)
		adopted := eventNotes(res.Name, v1alpha1.ReasonRunAdopted)
		GinkgoWriter.Printf("Ready %s after the kill; last run %s (%s) by %s; adoptions: %v; ledger %d; held %v\n",
			time.Since(killed).Round(time.Second), res.Status.LastRun.ID, res.Status.LastRun.Result, res.Status.LastRun.Controller,
			adopted, ledgerEntries(claim), held)
		Expect(adopted).To(HaveLen(1), "the next leader adopted the run (RunAdopted) (%s)", leadership())
		Expect(res.Status.LastRun.ID).To(Equal(run), "the run the killed leader started is the one that succeeded")
		Expect(res.Status.LastRun.Result).To(Equal(v1alpha1.RunSucceeded))
		Expect(held).To(BeEmpty(), "no plan was held")
		Expect(res.Status.CreatesPending).To(BeEmpty())
		Expect(ledgerEntries(claim)).To(Equal(1), "created once")
		Expect(locksHeld(claim)).To(BeEmpty(), "no lock of its state is left (another spec's reclaim may hold its own)")
	})
})
