package lifecycle_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 33: a queued run had no deadline, so a pool with no runners held a reconcile worker per
// resource for ever; once its resources outnumbered the workers (64 here), nothing else converged,
// deletions included. A run no runner takes within the queue timeout (suiteQueueTimeout) is
// withdrawn: its resource says WaitingForRunner and is queued again later.
var _ = Describe("A runner pool with no runners", func() {
	It("stalls only its own resources: 70 of them wait, with WaitingForRunner, while claims of an in-process class converge", func() {
		s := newScenario()
		pool := "empty-" + rand.String(5)
		Expect(k8s.Create(s.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: pool}})).To(Succeed())
		p := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: pool}, Spec: v1alpha1.InfraRunnerPoolSpec{ServiceAccountName: pool}}
		Expect(k8s.Create(s.ctx, p)).To(Succeed())
		DeferCleanup(k8s.Delete, s.ctx, p)
		stuckKind := "Stuck" + rand.String(6)
		stuck := fileClass("stuck-"+s.ns, stuckKind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) { c.Spec.RunnerPool = pool })
		Expect(k8s.Create(s.ctx, stuck)).To(Succeed())
		DeferCleanup(k8s.Delete, s.ctx, stuck)
		local := fileClass("local-"+s.ns, s.kind, v1alpha1.ReclaimDelete)
		Expect(k8s.Create(s.ctx, local)).To(Succeed())
		DeferCleanup(k8s.Delete, s.ctx, local)

		for i := range 70 {
			Expect(k8s.Create(s.ctx, fileClaim(s.ns, fmt.Sprintf("stuck-%d", i), stuckKind, s.dir, "never"))).To(Succeed())
		}
		// Every worker is taken by a run waiting for the empty pool before the in-process claims
		// come: the stall the spec is about is there (the old code never freed them). Waited for up
		// to the suite's timeout, not the queue timeout: on a loaded machine provisioning 70 claims
		// takes longer than one queue timeout, and the first runs are withdrawn (and queued again)
		// before the last come (seen in a cold CI run: 41 of 64 within 20 s).
		Eventually(func() int {
			list := &v1alpha1.InfraResourceList{}
			Expect(k8s.List(s.ctx, list, client.MatchingLabels{v1alpha1.LabelClaimNamespace: s.ns})).To(Succeed())
			waiting := 0
			for _, r := range list.Items {
				if dispatcher.Busy(r.Name) {
					waiting++
				}
			}
			return waiting
		}, timeout, 200*time.Millisecond).Should(BeNumerically(">=", 64), "runs waiting for the empty pool")
		var mine []*v1alpha1.InfraClaim
		for i := range 5 {
			c := fileClaim(s.ns, fmt.Sprintf("local-%d", i), s.kind, s.dir, "converged")
			Expect(k8s.Create(s.ctx, c)).To(Succeed())
			mine = append(mine, c)
		}
		for _, c := range mine {
			s.ready(c)
		}
		Eventually(func() string {
			got := s.claim(fileClaim(s.ns, "stuck-0", stuckKind, s.dir, ""))()
			res := &v1alpha1.InfraResource{}
			if err := k8s.Get(s.ctx, client.ObjectKey{Name: got.Spec.ResourceName}, res); err != nil {
				return err.Error()
			}
			c := condition(res.Status.Conditions, v1alpha1.ConditionSynced)
			return c.Reason + ": " + c.Message
		}, timeout, time.Second).Should(And(HavePrefix(v1alpha1.ReasonWaitingForRunner), ContainSubstring("no runner of pool "+pool)))

		By("deleting the pool's claims: nothing was applied, nothing to destroy, they go")
		for i := range 70 {
			Expect(k8s.Delete(s.ctx, fileClaim(s.ns, fmt.Sprintf("stuck-%d", i), stuckKind, s.dir, ""))).To(Succeed())
		}
		Eventually(func() []string {
			list := &v1alpha1.InfraResourceList{}
			Expect(k8s.List(s.ctx, list, client.MatchingLabels{v1alpha1.LabelClaimNamespace: s.ns})).To(Succeed())
			var left []string
			for _, r := range list.Items {
				if strings.HasPrefix(r.Name, "stuck-") {
					left = append(left, r.Name)
				}
			}
			return left
		}, 3*timeout, time.Second).Should(BeEmpty())
	})
})
