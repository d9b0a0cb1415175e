//go:build e2e

package e2e_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// ledgerAccount lets runs of the ledger classes write ConfigMaps, and nothing else
// (kubernetesAccess).
func ledgerAccount() string {
	const sa = "e2e-ledger"
	_ = k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: sa}})
	_, _ = kubectlErr("create", "clusterrole", sa, "--verb=get,list,watch,create,update,patch,delete", "--resource=configmaps")
	_, _ = kubectlErr("create", "clusterrolebinding", sa, "--clusterrole="+sa, "--serviceaccount="+system+":"+sa)
	return sa
}

// ledgerClass is a class of the slowledger module (a ConfigMap per creation, then a 20 s create),
// on pool ("" for the manager's own pool).
func ledgerClass(name, kind, pool string) {
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module:    v1alpha1.ModuleSource{Source: modulesURL + "//modules/slowledger", Version: "v0.1.0"},
			RunInputs: v1alpha1.RunInputs{RunnerPool: pool, KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: ledgerAccount()}},
			Variables: v1alpha1.Variables{
				"name":      {Raw: []byte(`"${claim.namespace}-${claim.name}"`)},
				"namespace": {Raw: []byte(`"${claim.namespace}"`)},
			}},
	}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, c) })
}

// ledgerEntries counts the ConfigMaps the claim's module created (its creations).
func ledgerEntries(c *v1alpha1.InfraClaim) int {
	list := &corev1.ConfigMapList{}
	Expect(k8s.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{"conductor.io/ledger": c.Namespace + "-" + c.Name})).To(Succeed())
	return len(list.Items)
}

// rolloutDuringCreates creates five claims of kind, waits until creates are under way, restarts
// the manager (kubectl rollout restart), and checks what users expect of a rollout: every claim
// Ready, no plan held, no lock held, every object created once (the ledger).
func rolloutDuringCreates(kind, prefix string) {
	ns := newNamespace(prefix)
	var claims []*v1alpha1.InfraClaim
	for i := range 5 {
		c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%d", i)},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: kind}}
		Expect(k8s.Create(ctx, c)).To(Succeed())
		claims = append(claims, c)
	}
	underWay := func() int {
		n := 0
		for _, c := range claims {
			if res := boundResource(c); res != nil && len(res.Status.CreatesPending) > 0 && res.Status.LastRun != nil && res.Status.LastRun.Result == v1alpha1.RunRunning {
				n++
			}
		}
		return n
	}
	eventually(underWay).Should(BeNumerically(">=", 1), "a create is under way")
	GinkgoWriter.Printf("%s: %d create(s) under way at the rollout\n", kind, underWay())
	restarted := time.Now()
	kubectl("-n", system, "rollout", "restart", "deployment/"+deployment)
	held := map[string]string{}
	eventually(func() int {
		ready := 0
		for _, c := range claims {
			res := boundResource(c)
			if res != nil && (res.Status.PendingPlan != nil || syncedReason(res) == v1alpha1.ReasonInterruptedCreate) {
				held[c.Name] = syncedReason(res)
			}
			got := &v1alpha1.InfraClaim{}
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
			if strings.HasPrefix(readyCondition(got.Status.Conditions), "True") {
				ready++
			}
		}
		return ready
	}).Should(Equal(len(claims)), "every claim Ready after the rollout")
	kubectl("-n", system, "rollout", "status", "deployment/"+deployment, "--timeout=10m")
	GinkgoWriter.Printf("%s: all %d claims Ready %s after the rollout began\n", kind, len(claims), time.Since(restarted).Round(time.Second))
	Expect(held).To(BeEmpty(), "no plan was held")
	for _, c := range claims {
		Expect(ledgerEntries(c)).To(Equal(1), "claim %s: created once", c.Name)
	}
	Expect(locksHeld(claims...)).To(BeEmpty())
}

// boundResource is the claim's resource once bound, or nil.
func boundResource(c *v1alpha1.InfraClaim) *v1alpha1.InfraResource {
	got := &v1alpha1.InfraClaim{}
	if k8s.Get(ctx, client.ObjectKeyFromObject(c), got) != nil || got.Status.ResourceName == "" {
		return nil
	}
	res := &v1alpha1.InfraResource{}
	if k8s.Get(ctx, client.ObjectKey{Name: got.Status.ResourceName}, res) != nil {
		return nil
	}
	return res
}

// syncedReason is the resource's Synced condition reason.
func syncedReason(res *v1alpha1.InfraResource) string {
	for _, c := range res.Status.Conditions {
		if c.Type == v1alpha1.ConditionSynced {
			return c.Reason
		}
	}
	return ""
}

var _ = Describe("A rollout of the manager during creates", func() {
	It("lets the creates under way finish (drain): all Ready, no hold, no lock, each created once", func() {
		ledgerClass("e2e-rollout", "E2ERollout", "")
		rolloutDuringCreates("E2ERollout", "e2e-rollout-")
	})
})
