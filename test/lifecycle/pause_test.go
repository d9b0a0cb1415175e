package lifecycle_test

import (
	"encoding/json"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// removeAnnotation removes one annotation of the resource name (a JSON merge patch's null).
func removeAnnotation(s *scenario, name, key string) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: nil}}})
	Expect(k8s.Patch(s.ctx, &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
}

var _ = Describe("Pause and sync now", func() {
	// Issue 48 item 3, with real runs: a sync request brings a drift check by the module's own
	// plan and is echoed; a paused resource leaves a new generation unapplied, and resuming applies it.
	It("a sync request runs a drift check and is echoed; a paused resource applies nothing until resumed", func() {
		s := newScenario()
		res := fileResource(s, "paused-"+s.ns, "first")
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		path := filepath.Join(s.dir, res.Name+".txt")
		readyAt(s, res.Name)

		By("a sync request: a drift check now, echoed in status.lastHandledReconcileAt when it starts")
		annotate(s, res.Name, v1alpha1.AnnotationReconcileRequestedAt, "request-1")
		Eventually(func() string { return s.resource(res.Name)().Status.LastHandledReconcileAt }, timeout, 200*time.Millisecond).
			Should(Equal("request-1"))
		Eventually(func() string {
			last := s.resource(res.Name)().Status.LastRun
			return last.Operation + " " + string(last.Result)
		}, timeout, 200*time.Millisecond).Should(Equal("drift Succeeded"))

		By("paused: Synced says ReconcilePaused, and a new generation is not applied")
		annotate(s, res.Name, v1alpha1.AnnotationPaused, "true")
		Eventually(syncedReason(s, res.Name), timeout, 200*time.Millisecond).Should(Equal(v1alpha1.ReasonReconcilePaused))
		setContent(s, res.Name, "second")
		Consistently(func() string { return fileContent(path) }, 4*time.Second, 500*time.Millisecond).Should(Equal("first"))
		Expect(s.resource(res.Name)().Status.ObservedGeneration).To(BeNumerically("<", s.resource(res.Name)().Generation))

		By("resumed: the due generation is applied at once")
		removeAnnotation(s, res.Name, v1alpha1.AnnotationPaused)
		Eventually(func() string { return fileContent(path) }, timeout, 200*time.Millisecond).Should(Equal("second"))
		readyAt(s, res.Name)
		Expect(syncedReason(s, res.Name)()).NotTo(Equal(v1alpha1.ReasonReconcilePaused))
	})
})

// Issue 65 item 8: a claim whose resource is paused says so (it read Ready=True with its change
// waiting unsaid), and says nothing more once the resource is resumed and the change applied.
var _ = Describe("A claim whose resource is paused", func() {
	It("says ChangePending ReconcilePaused while its change waits, and applies it once resumed", func() {
		s := newScenario()
		class := fileClass("paused-claims-"+s.ns, s.kind, v1alpha1.ReclaimDelete)
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(s.ctx, class) })
		claim := fileClaim(s.ns, "paused", s.kind, s.dir, "first")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		path := filepath.Join(s.dir, s.ns+"-paused.txt")
		Expect(fileContent(path)).To(Equal("hello first"))

		annotate(s, res.Name, v1alpha1.AnnotationPaused, "true")
		setGreeting(s, claim, "second")
		pending := func() string {
			c := condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionChangePending)
			return string(c.Status) + " " + c.Reason + ": " + c.Message
		}
		Eventually(pending, timeout, 200*time.Millisecond).Should(And(HavePrefix("True "+v1alpha1.ReasonReconcilePaused),
			ContainSubstring("kubectl conductor resume claim/paused -n "+s.ns)))
		Expect(fileContent(path)).To(Equal("hello first"))

		removeAnnotation(s, res.Name, v1alpha1.AnnotationPaused)
		Eventually(func() string { return fileContent(path) }, timeout, 200*time.Millisecond).Should(Equal("hello second"))
		Eventually(pending, timeout, 200*time.Millisecond).Should(Equal(" : "))
	})
})
