package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// opsResource is a static file resource with the given day-2 rules.
func opsResource(s *scenario, name, content string, ops v1alpha1.Operations) *v1alpha1.InfraResource {
	r := fileResource(s, name, content)
	r.Spec.Operations = ops
	return r
}

func pendingPlan(s *scenario, name string) func() *v1alpha1.PendingPlan {
	return func() *v1alpha1.PendingPlan { return s.resource(name)().Status.PendingPlan }
}

// planText reads Terraform's rendering of a pending plan from its Secret. Issue 65 item 7: with
// state encryption on (the suite's default) the Secret holds it encrypted as states are, and it
// names no resource address in plain; before, the saved plan was ciphertext and its rendering not.
func planText(s *scenario, pp *v1alpha1.PendingPlan) string {
	sec, err := kube.CoreV1().Secrets(stateNamespace).Get(s.ctx, pp.Secret, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	data := sec.Data["plan.txt"]
	if plainStates.Load() {
		return string(data)
	}
	Expect(statebackend.IsEncrypted(data)).To(BeTrue(), "the plan's rendering is stored encrypted")
	Expect(string(data)).NotTo(ContainSubstring("module.main"))
	plain, err := stateServer.Store().Keyring().Open(data)
	Expect(err).NotTo(HaveOccurred())
	return string(plain)
}

var _ = Describe("Day-2 operations", func() {
	It("Manual approval: plans, shows the plan, applies only that plan id once approved, and discards a stale approval", func() {
		s := newScenario()
		res := opsResource(s, "manual-"+s.ns, "v1", v1alpha1.Operations{Approval: v1alpha1.ApprovalManual, AllowDestructiveChanges: true})
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		path := filepath.Join(s.dir, res.Name+".txt")

		By("the first plan waits, with its summary, changes and Terraform's rendering")
		Eventually(pendingPlan(s, res.Name), timeout, time.Second).ShouldNot(BeNil())
		first := pendingPlan(s, res.Name)()
		Expect(first.Reason).To(Equal(resourcecontroller.WaitManual))
		Expect(first.Summary).To(Equal(v1alpha1.PlanSummary{Add: 2}))
		Expect(first.Changes).To(ContainElement("module.main.local_file.this: create"))
		Expect(planText(s, first)).To(And(ContainSubstring("module.main.local_file.this"), ContainSubstring("will be created"),
			ContainSubstring("(sensitive value)")))
		Expect(syncedReason(s, res.Name)()).To(Equal(v1alpha1.ReasonWaitingForApproval))
		Expect(s.resource(res.Name)().Status.Phase).To(Equal(v1alpha1.ResourcePending), "waiting for a person is not a failure")
		Consistently(func() string { return fileContent(path) }, 3*time.Second, time.Second).Should(HavePrefix("<"), "nothing applied")
		Expect(s.resource(res.Name)().Status.Phase).To(Equal(v1alpha1.ResourcePending), "still waiting, not failed, after later reconciles")

		By("a newer generation discards that plan; approving the stale id applies nothing")
		setContent(s, res.Name, "second version")
		Eventually(func() string { return pendingPlan(s, res.Name)().ID }, timeout, time.Second).ShouldNot(Equal(first.ID))
		second := pendingPlan(s, res.Name)()
		Expect(second.Generation).To(Equal(s.resource(res.Name)().Generation))
		annotate(s, res.Name, v1alpha1.AnnotationApprovePlan, first.ID)
		Eventually(syncedReason(s, res.Name), timeout, time.Second).Should(Equal(v1alpha1.ReasonPlanDiscarded))
		Expect(syncedCondition(s.resource(res.Name)()).Message).To(And(ContainSubstring(first.ID), ContainSubstring(second.ID)))
		Expect(fileContent(path)).To(HavePrefix("<"))

		By("approving the pending plan's id applies it, and the approval is consumed")
		annotate(s, res.Name, v1alpha1.AnnotationApprovePlan, second.ID)
		Eventually(func() string { return fileContent(path) }, timeout, time.Second).Should(Equal("second version"))
		readyAt(s, res.Name)
		got := s.resource(res.Name)()
		Expect(got.Annotations).NotTo(HaveKey(v1alpha1.AnnotationApprovePlan))
		Expect(got.Status.PendingPlan).To(BeNil())
		Expect(got.Status.LastRun.PlanID).To(Equal(second.ID))

		By("history and logs: the runs, newest first; the successful apply keeps only its summary, the plan that waited keeps its log for admins")
		Expect(got.Status.Runs).NotTo(ContainElement(HaveField("ID", got.Status.LastRun.ID)), "status.runs holds the runs before lastRun")
		history := got.Status.RunHistory()
		Expect(len(history)).To(BeNumerically(">=", 2))
		Expect(history[0]).To(And(HaveField("Operation", "apply"), HaveField("Result", v1alpha1.RunSucceeded), HaveField("PlanID", second.ID),
			HaveField("LogSecret", ""), HaveField("Summary", Not(BeNil()))))
		Expect(history[1].Result).To(Equal(v1alpha1.RunWaitingForApproval))
		Expect(history[1].LogSecret).NotTo(BeEmpty())
		logSecret, err := kube.CoreV1().Secrets(stateNamespace).Get(s.ctx, history[1].LogSecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		// The file's content is a sensitive attribute of local_file: Terraform's output redacts it,
		// and the log holds nothing else (no show -json, which carries every value).
		Expect(string(logSecret.Data["log"])).To(And(ContainSubstring("local_file.this"), Not(ContainSubstring("Apply complete")),
			Not(ContainSubstring(sensitiveWord(got))), Not(ContainSubstring("second version")), Not(ContainSubstring("resource_changes"))))
		Expect(got.Status.Phase).To(Equal(v1alpha1.ResourceAvailable))
	})

	It("a replace on an Automatic resource waits for approval (the destructive-change guard); an addition does not", func() {
		s := newScenario()
		res := opsResource(s, "guard-"+s.ns, "v1", v1alpha1.Operations{})
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		path := filepath.Join(s.dir, res.Name+".txt")
		readyAt(s, res.Name)
		Expect(fileContent(path)).To(Equal("v1"), "the first provisioning destroys nothing: no approval")

		setContent(s, res.Name, "v2")
		Eventually(pendingPlan(s, res.Name), timeout, time.Second).ShouldNot(BeNil())
		pp := pendingPlan(s, res.Name)()
		Expect(pp.Reason).To(Equal(resourcecontroller.WaitDestructive))
		Expect(pp.Changes).To(ContainElement("module.main.local_file.this: delete+create"))
		Expect(syncedCondition(s.resource(res.Name)()).Message).To(ContainSubstring("module.main.local_file.this"))
		Consistently(func() string { return fileContent(path) }, 3*time.Second, time.Second).Should(Equal("v1"))

		annotate(s, res.Name, v1alpha1.AnnotationApprovePlan, pp.ID)
		Eventually(func() string { return fileContent(path) }, timeout, time.Second).Should(Equal("v2"))
		readyAt(s, res.Name)
	})

	It("drift: Correct re-applies, Report only tells, both with a Drifted condition naming the address", func() {
		s := newScenario()
		correct := opsResource(s, "drift-correct-"+s.ns, "kept", v1alpha1.Operations{AllowDestructiveChanges: true})
		report := opsResource(s, "drift-report-"+s.ns, "kept", v1alpha1.Operations{DriftPolicy: v1alpha1.DriftReport})
		Expect(k8s.Create(s.ctx, correct)).To(Succeed())
		Expect(k8s.Create(s.ctx, report)).To(Succeed())
		readyAt(s, correct.Name)
		readyAt(s, report.Name)

		By("someone edits both files behind Terraform's back")
		for _, r := range []*v1alpha1.InfraResource{correct, report} {
			Expect(os.WriteFile(filepath.Join(s.dir, r.Name+".txt"), []byte("edited by hand"), 0o644)).To(Succeed())
		}
		drifted := func(name string) func() metav1.Condition {
			return func() metav1.Condition {
				return condition(s.resource(name)().Status.Conditions, v1alpha1.ConditionDrifted)
			}
		}
		Eventually(drifted(report.Name), timeout, time.Second).Should(And(HaveField("Status", metav1.ConditionTrue),
			HaveField("Reason", v1alpha1.ReasonDriftDetected), HaveField("Message", ContainSubstring("module.main.local_file.this"))))
		Expect(s.resource(report.Name)().Status.Drift.Addresses).To(ContainElement("module.main.local_file.this"))
		Expect(eventReasons(s, report.Name)).To(ContainElement(HavePrefix(v1alpha1.ReasonDriftDetected)))
		Consistently(func() string { return fileContent(filepath.Join(s.dir, report.Name+".txt")) }, 5*time.Second, time.Second).
			Should(Equal("edited by hand"), "Report never re-applies")

		Eventually(func() string { return fileContent(filepath.Join(s.dir, correct.Name+".txt")) }, timeout, time.Second).Should(Equal("kept"))
		Expect(eventReasons(s, correct.Name)).To(ContainElement(HavePrefix(v1alpha1.ReasonDriftDetected)))
		Eventually(drifted(correct.Name), timeout, time.Second).Should(HaveField("Status", metav1.ConditionFalse))
	})
})

// sensitiveWord is the resource's generated password (random_password.result, sensitive) as its
// state holds it: a value that must never reach a log.
func sensitiveWord(res *v1alpha1.InfraResource) string {
	data, found, err := stateServer.Store().For(statebackend.SuffixFor(res.Name)).Read(context.Background())
	Expect(err).NotTo(HaveOccurred())
	Expect(found).To(BeTrue())
	var st struct {
		Resources []struct {
			Type      string `json:"type"`
			Instances []struct {
				Attributes map[string]any `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	Expect(json.Unmarshal(data, &st)).To(Succeed())
	for _, r := range st.Resources {
		if r.Type == "random_password" && len(r.Instances) > 0 {
			pw, _ := r.Instances[0].Attributes["result"].(string)
			Expect(pw).To(HaveLen(20))
			return pw
		}
	}
	Fail("no random_password in state")
	return ""
}

var _ = Describe("Fair share of the runner pool", func() {
	It("a claim in a second namespace is served within a few runs while dozens wait in the first, and shows its place in line", func() {
		busy, other := newScenario(), newScenario()
		other.kind = busy.kind
		Expect(k8s.Create(busy.ctx, fileClass("fair-"+busy.ns, busy.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		const many = 40
		var claims []*v1alpha1.InfraClaim
		for i := range many {
			c := fileClaim(busy.ns, fmt.Sprintf("q%02d", i), busy.kind, busy.dir, "queued")
			Expect(k8s.Create(busy.ctx, c)).To(Succeed())
			claims = append(claims, c)
		}
		readyCount := func() int {
			n := 0
			for _, c := range claims {
				if readyStatus(busy.claim(c)()) == metav1.ConditionTrue {
					n++
				}
			}
			return n
		}
		// Wait until the first namespace's runs hold the pool and the rest queue behind them.
		Eventually(func() int {
			n := 0
			for _, c := range claims {
				if name := busy.claim(c)().Status.ResourceName; name != "" &&
					syncedCondition(busy.resource(name)()).Reason == v1alpha1.ReasonWaitingForRunner {
					n++
				}
			}
			return n
		}, timeout, 200*time.Millisecond).Should(BeNumerically(">=", 20))

		late := fileClaim(other.ns, "late", other.kind, other.dir, "fair")
		Expect(k8s.Create(other.ctx, late)).To(Succeed())
		Eventually(other.claim(late), timeout, 200*time.Millisecond).Should(WithTransform(readyStatus, Equal(metav1.ConditionTrue)))
		Expect(many-readyCount()).To(BeNumerically(">=", 25), "the late claim did not wait for the first namespace's queue")
		for _, c := range claims {
			Eventually(busy.claim(c), timeout, time.Second).Should(WithTransform(readyStatus, Equal(metav1.ConditionTrue)))
		}
		// Reclaimed in the background: forty more resources drift-checked every syncInterval would
		// hold the suite's one drift slot for minutes and starve the other specs' checks.
		for _, c := range append(claims, late) {
			Expect(k8s.Delete(busy.ctx, c)).To(Succeed())
		}
	})
})
