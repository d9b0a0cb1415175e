package lifecycle_test

import (
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 49 with real plans (OpenTofu, the local and random providers): a class's CEL rules
// decide inside the run, between plan and apply.
var _ = Describe("Plan policy", func() {
	It("refuses a plan a Deny rule breaks (past an approval), holds one a RequireApproval rule breaks until approved, and a class whose rule does not compile is not Ready", func() {
		s := newScenario()
		class := fileClass("policy-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Policy = &v1alpha1.PlanPolicy{Rules: []v1alpha1.PolicyRule{
				{Name: "no-secrets", Action: v1alpha1.PolicyDeny, Message: "files must not hold the word secret",
					Expression: "change.type != 'local_file' || !change.after.content.contains('secret')"},
				{Name: "replace-in-prod", Action: v1alpha1.PolicyRequireApproval, Message: "a prod claim's file is replaced only with approval",
					Expression: "!('delete' in change.actions) || !('tier' in claim.labels) || claim.labels.tier != 'prod'"},
			}}
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		claim := fileClaim(s.ns, "db", s.kind, s.dir, "secret sauce")
		claim.Labels = map[string]string{"tier": "prod"}
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		path := filepath.Join(s.dir, s.ns+"-db.txt")

		By("the first plan breaks no-secrets: refused, named with its rule and address, nothing applied")
		Eventually(func() string { return s.claim(claim)().Spec.ResourceName }, timeout, time.Second).ShouldNot(BeEmpty())
		res := s.claim(claim)().Spec.ResourceName
		Eventually(pendingPlan(s, res), timeout, time.Second).ShouldNot(BeNil())
		pp := pendingPlan(s, res)()
		Expect(pp.Reason).To(Equal(v1alpha1.HoldPolicyDenied))
		Expect(pp.Rule).To(Equal("no-secrets"))
		Expect(pp.Message).To(Equal("rule no-secrets: files must not hold the word secret (module.main.local_file.this)"))
		Expect(pp.PolicyDigest).NotTo(BeEmpty())
		Expect(syncedReason(s, res)()).To(Equal(v1alpha1.ReasonPolicyDenied))
		Expect(syncedCondition(s.resource(res)()).Message).To(ContainSubstring("no approval applies it"))
		AddReportEntry("refused plan (Synced)", syncedCondition(s.resource(res)()).Message)
		Eventually(func() metav1.Condition {
			return condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionChangePending)
		}, timeout, time.Second).Should(And(HaveField("Reason", v1alpha1.ReasonPolicyDenied),
			HaveField("Message", ContainSubstring("files must not hold the word secret"))))
		Expect(fileContent(path)).To(HavePrefix("<"), "nothing applied")
		Eventually(func() []string { return eventReasons(s, res) }, timeout, time.Second).Should(
			ContainElement(HavePrefix(v1alpha1.ReasonPolicyDenied + ": plan " + pp.ID + " refused by the class's policy, rule no-secrets")))

		By("an approval of the refused plan applies nothing")
		annotate(s, res, v1alpha1.AnnotationApprovePlan, pp.ID)
		Consistently(func() string { return fileContent(path) }, 5*time.Second, time.Second).Should(HavePrefix("<"))
		Expect(pendingPlan(s, res)().Reason).To(Equal(v1alpha1.HoldPolicyDenied))

		By("a claim that passes is applied")
		setGreeting(s, claim, "world")
		Eventually(func() string { return fileContent(path) }, timeout, time.Second).Should(Equal("hello world"))
		readyAt(s, res)
		Expect(s.resource(res)().Status.PendingPlan).To(BeNil())

		By("a replace of a prod claim's file waits for approval under replace-in-prod, then applies once approved")
		setGreeting(s, claim, "there")
		Eventually(func() string {
			if pp := pendingPlan(s, res)(); pp != nil {
				return pp.Reason + "/" + pp.Rule
			}
			return ""
		}, timeout, time.Second).Should(Equal(v1alpha1.HoldPolicyApproval + "/replace-in-prod"))
		pp = pendingPlan(s, res)()
		Expect(pp.Changes).To(ContainElement("module.main.local_file.this: delete+create"))
		Expect(syncedReason(s, res)()).To(Equal(v1alpha1.ReasonWaitingForApproval))
		Eventually(func() string {
			return condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionChangePending).Message
		}, timeout, time.Second).Should(ContainSubstring("a prod claim's file is replaced only with approval"))
		Consistently(func() string { return fileContent(path) }, 3*time.Second, time.Second).Should(Equal("hello world"))
		annotate(s, res, v1alpha1.AnnotationApprovePlan, pp.ID)
		Eventually(func() string { return fileContent(path) }, timeout, time.Second).Should(Equal("hello there"))
		readyAt(s, res)

		By("a rule that does not compile makes the class not Ready, with CEL's message")
		Eventually(func() error {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			got.Spec.Policy.Rules = append(got.Spec.Policy.Rules, v1alpha1.PolicyRule{Name: "typo", Action: v1alpha1.PolicyDeny,
				Expression: "change.afer.content == ''"})
			return k8s.Update(s.ctx, got)
		}, timeout, 200*time.Millisecond).Should(Succeed())
		Eventually(classCondition(s, class.Name, v1alpha1.ConditionReady), timeout, time.Second).Should(And(HaveField("Reason", v1alpha1.ReasonPolicyInvalid),
			HaveField("Message", ContainSubstring(`rule 2 (typo): change has no key "afer"`))))
	})
})

// Issue 65 item 8 with real plans: a rule reads the claim's namespace labels (the administrators'),
// not only the claim's own (its tenant's), and a changed namespace label plans again at the
// resource's next reconcile.
var _ = Describe("Plan policy on namespace labels", func() {
	It("refuses a plan for a claim in a frozen namespace whatever the claim's own labels say, and applies once the namespace is open", func() {
		s := newScenario()
		setNamespaceLabel(s, "tier", "frozen")
		class := fileClass("nspolicy-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Policy = &v1alpha1.PlanPolicy{Rules: []v1alpha1.PolicyRule{
				{Name: "frozen", Action: v1alpha1.PolicyDeny, Message: "the namespace is frozen",
					Expression: "!('tier' in namespaceObject.labels) || namespaceObject.labels.tier != 'frozen'"},
			}}
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		claim := fileClaim(s.ns, "app", s.kind, s.dir, "world")
		claim.Labels = map[string]string{"tier": "open"}
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		path := filepath.Join(s.dir, s.ns+"-app.txt")

		Eventually(func() string { return s.claim(claim)().Spec.ResourceName }, timeout, time.Second).ShouldNot(BeEmpty())
		res := s.claim(claim)().Spec.ResourceName
		Eventually(pendingPlan(s, res), timeout, time.Second).ShouldNot(BeNil())
		pp := pendingPlan(s, res)()
		Expect(pp.Reason).To(Equal(v1alpha1.HoldPolicyDenied))
		Expect(pp.Message).To(HavePrefix("rule frozen: the namespace is frozen (module.main.local_file.this"))
		Expect(fileContent(path)).To(HavePrefix("<"), "nothing applied")

		By("the namespace opened, and a sync asked: planned again under the new label, applied")
		setNamespaceLabel(s, "tier", "open")
		annotate(s, res, v1alpha1.AnnotationReconcileRequestedAt, "namespace-opened")
		Eventually(func() string { return fileContent(path) }, timeout, time.Second).Should(Equal("hello world"))
		readyAt(s, res)
	})
})

// setNamespaceLabel sets a label of the scenario's namespace.
func setNamespaceLabel(s *scenario, key, value string) {
	Eventually(func() error {
		ns := &corev1.Namespace{}
		if err := k8s.Get(s.ctx, client.ObjectKey{Name: s.ns}, ns); err != nil {
			return err
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[key] = value
		return k8s.Update(s.ctx, ns)
	}, timeout, 200*time.Millisecond).Should(Succeed())
}

// classCondition reads the class's condition of type typ (zero when it has none).
func classCondition(s *scenario, name, typ string) func() metav1.Condition {
	return func() metav1.Condition {
		c := &v1alpha1.InfraClass{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: name}, c)).To(Succeed())
		return condition(c.Status.Conditions, typ)
	}
}

// setGreeting changes the claim's greeting parameter (the file's content), read again on a
// conflict with the controller's own write of the claim.
func setGreeting(s *scenario, c *v1alpha1.InfraClaim, greeting string) {
	Eventually(func() error {
		got := s.claim(c)()
		got.Spec.Parameters["greeting"] = js(`"` + greeting + `"`)
		return k8s.Update(s.ctx, got)
	}, timeout, 200*time.Millisecond).Should(Succeed())
}

// Issue 49 item 3: the class keeps a ValidatingAdmissionPolicy from its template and the module's
// variable types, and the API server refuses a claim whose parameters cannot render.
var _ = Describe("Claims checked at admission", func() {
	It("refuses a claim without a parameter the template needs, or with one of the wrong type, and accepts one that fits", func() {
		s := newScenario()
		class := fileClass("admission-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Variables["mode"] = js(`"${lookup(claim.spec.parameters, \"mode\", 644)}"`)
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		Eventually(classCondition(s, class.Name, v1alpha1.ConditionAdmissionChecked), timeout, time.Second).Should(And(HaveField("Reason", v1alpha1.ReasonParametersChecked),
			HaveField("Message", ContainSubstring("dir, greeting, mode"))))

		// Claims that name the class are checked (one that names none may bind a free resource).
		claimOf := func(name string) *v1alpha1.InfraClaim {
			c := fileClaim(s.ns, name, s.kind, s.dir, "world")
			c.Spec.ClassName = class.Name
			return c
		}

		By("a claim without dir is refused by the API server, with the reason")
		noDir := claimOf("nodir")
		delete(noDir.Spec.Parameters, "dir")
		Eventually(func() error { return k8s.Create(s.ctx, noDir.DeepCopy()) }, timeout, time.Second).Should(
			MatchError(ContainSubstring("spec.parameters.dir is required by class " + class.Name)))
		AddReportEntry("admission refusal", k8s.Create(s.ctx, noDir.DeepCopy()).Error())

		By("a mode that is not a number is refused; a claim that fits is accepted and provisioned")
		bad := claimOf("badmode")
		bad.Spec.Parameters["mode"] = js(`"rw-r--r--"`)
		Expect(k8s.Create(s.ctx, bad)).To(MatchError(ContainSubstring("spec.parameters.mode must be a number (module variable mode is number)")))
		good := claimOf("good")
		good.Spec.Parameters["mode"] = js(`"600"`)
		Expect(k8s.Create(s.ctx, good)).To(Succeed())
		s.ready(good)

		By("an edit that breaks a parameter is refused too; the claim keeps its parameters")
		got := s.claim(good)()
		got.Spec.Parameters["mode"] = js(`[6, 0, 0]`)
		Expect(k8s.Update(s.ctx, got)).To(MatchError(ContainSubstring("spec.parameters.mode must be a number")))
		Expect(string(s.claim(good)().Spec.Parameters["mode"].Raw)).To(Equal(`"600"`))

		By("a claim that names no class is not checked: it may bind a free resource without rendering")
		unnamed := claimOf("anyclass")
		unnamed.Spec.ClassName = ""
		delete(unnamed.Spec.Parameters, "dir")
		Expect(k8s.Create(s.ctx, unnamed)).To(Succeed())
	})
})
