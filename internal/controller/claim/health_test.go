package claim_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// verdict is what Flux (kstatus) and Argo CD (the Lua health check of docs/monitoring.md) say of
// an object.
type verdict struct {
	KStatus status.Status
	ArgoCD  string
}

// argoHealth is config/monitoring/argocd-health.lua, the check docs/monitoring.md shows.
func argoHealth() string {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "monitoring", "argocd-health.lua"))
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// luaValue turns a JSON value (unstructured content) into a Lua value, as Argo CD hands obj to
// its health scripts: objects and arrays become tables.
func luaValue(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, luaValue(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(luaValue(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}

// verdictOf computes both tools' verdicts on obj as the API server returns it.
func verdictOf(obj client.Object) verdict {
	content, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{Object: content}
	res, err := status.Compute(u)
	Expect(err).NotTo(HaveOccurred())

	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", luaValue(L, u.Object))
	Expect(L.DoString(argoHealth())).To(Succeed())
	hs, ok := L.Get(-1).(*lua.LTable)
	Expect(ok).To(BeTrue(), "the health script returns a table")
	return verdict{KStatus: res.Status, ArgoCD: hs.RawGetString("status").String()}
}

var (
	inProgress = verdict{status.InProgressStatus, "Progressing"}
	current    = verdict{status.CurrentStatus, "Healthy"}
	failed     = verdict{status.FailedStatus, "Degraded"}
)

func updateResourceStatus(ctx context.Context, name string, mutate func(*v1alpha1.InfraResource)) {
	Eventually(func() error {
		res := getResource(ctx, name)()
		mutate(res)
		return k8s.Status().Update(ctx, res)
	}, timeout).Should(Succeed())
}

var _ = Describe("Health as GitOps tools read it", func() {
	It("drives a claim through its phases: kstatus (Flux) and the Argo CD check agree at each", func() {
		ctx := context.Background()
		ns, kind := newNamespace(ctx), uniqueKind()
		claim := newClaim(ns, "db", kind, "5Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		claimVerdict := func() verdict { return verdictOf(getClaim(ctx, claim)()) }

		By("Pending, nothing matches and no class applies: in progress")
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(readyReason, Equal(v1alpha1.ReasonNoMatchingResource)))
		Expect(claimVerdict()).To(Equal(inProgress))
		Expect(meta.FindStatusCondition(getClaim(ctx, claim)().Status.Conditions, v1alpha1.ConditionReconciling)).
			To(HaveField("Reason", v1alpha1.ReasonNoMatchingResource))

		By("Bound to a resource that has not reported readiness: in progress")
		name := "health-" + ns
		Expect(k8s.Create(ctx, staticResource(name, kind, "10Gi"))).To(Succeed()) // the claim waiting for it binds it at once
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimBound)))
		Expect(claimVerdict()).To(Equal(inProgress))

		By("the resource is Ready and wrote the connection Secret: current")
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-conn",
			Labels: map[string]string{statebackend.LabelResource: v1alpha1.LabelValue(name)}}}
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		updateResourceStatus(ctx, name, func(r *v1alpha1.InfraResource) {
			meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied, Message: "applied"})
			r.Status.ConnectionSecret = &v1alpha1.SecretReference{Namespace: ns, Name: "db-conn"}
		})
		Eventually(claimVerdict, timeout).Should(Equal(current))
		conds := getClaim(ctx, claim)().Status.Conditions
		Expect(meta.FindStatusCondition(conds, v1alpha1.ConditionReconciling)).To(BeNil())
		Expect(meta.FindStatusCondition(conds, v1alpha1.ConditionStalled)).To(BeNil())
		Expect(meta.FindStatusCondition(conds, v1alpha1.ConditionChangePending)).To(BeNil(), "nothing waits")

		By("a plan that deletes objects waits for approval: the claim says so and how to move it on, and stays current")
		updateResourceStatus(ctx, name, func(r *v1alpha1.InfraResource) {
			r.Status.PendingPlan = &v1alpha1.PendingPlan{ID: "0123456789ab", Reason: "DestructiveChange",
				Summary: v1alpha1.PlanSummary{Add: 1, Destroy: 1}, Generation: r.Generation, CreatedAt: metav1.Now()}
		})
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(getClaim(ctx, claim)().Status.Conditions, v1alpha1.ConditionChangePending)
		}, timeout).Should(And(Not(BeNil()), HaveField("Reason", v1alpha1.ReasonDestructiveChange),
			HaveField("Message", ContainSubstring("plan 0123456789ab (1 to add, 0 to change, 1 to destroy)")),
			HaveField("Message", ContainSubstring("kubectl conductor approve claim/db -n "+ns))))
		Expect(claimVerdict()).To(Equal(current), "the infrastructure is usable meanwhile")
		updateResourceStatus(ctx, name, func(r *v1alpha1.InfraResource) { r.Status.PendingPlan = nil })
		Eventually(func() *metav1.Condition {
			return meta.FindStatusCondition(getClaim(ctx, claim)().Status.Conditions, v1alpha1.ConditionChangePending)
		}, timeout).Should(BeNil())

		By("the connection Secret deleted by hand: not Ready until it is back")
		Expect(k8s.Delete(ctx, secret)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(readyReason, Equal(v1alpha1.ReasonConnectionSecretMissing)))
		Expect(claimVerdict()).To(Equal(inProgress))
		secret.ResourceVersion = ""
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		Eventually(claimVerdict, timeout).Should(Equal(current))

		By("the resource is forced away: the claim is Lost, failed")
		Expect(k8s.Delete(ctx, getResource(ctx, name)())).To(Succeed())
		Eventually(func() error {
			res := getResource(ctx, name)()
			res.Finalizers = nil
			return k8s.Update(ctx, res)
		}, timeout).Should(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(phaseOf, Equal(v1alpha1.ClaimLost)))
		Eventually(claimVerdict, timeout).Should(Equal(failed))
		Expect(meta.FindStatusCondition(getClaim(ctx, claim)().Status.Conditions, v1alpha1.ConditionStalled)).
			To(HaveField("Reason", v1alpha1.ReasonResourceLost))
	})

	It("the Argo CD check, as kstatus, finds a generation the controller has not observed in progress", func() {
		ctx := context.Background()
		ns, kind := newNamespace(ctx), uniqueKind()
		claim := newClaim(ns, "db", kind, "5Gi")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		Eventually(getClaim(ctx, claim), timeout).Should(WithTransform(readyReason, Equal(v1alpha1.ReasonNoMatchingResource)))
		got := getClaim(ctx, claim)()
		Expect(verdictOf(got)).To(Equal(inProgress))
		got.Generation++ // a spec change the controller has not seen yet
		Expect(verdictOf(got)).To(Equal(inProgress))
		got.Status.Conditions = nil
		Expect(verdictOf(got)).To(Equal(verdict{status.InProgressStatus, "Progressing"}), "by the generation alone")

		_, file, _, _ := runtime.Caller(0)
		docs, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "monitoring.md"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(docs)).To(ContainSubstring(argoHealth()), "docs/monitoring.md shows the check as it is tested")
	})
})

func readyReason(c *v1alpha1.InfraClaim) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady); cond != nil {
		return cond.Reason
	}
	return ""
}
