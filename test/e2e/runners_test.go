//go:build e2e

package e2e_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// runnerPods lists the pool's runner pods that are not being deleted.
func runnerPods(pool string) []corev1.Pod {
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(system), client.MatchingLabels{"conductor.io/runner-pool": pool})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// runnerLogs is every runner pod's log of pool, by pod name.
func runnerLogs(pool string) map[string]string {
	out := map[string]string{}
	for _, p := range runnerPods(pool) {
		data, err := kube.CoreV1().Pods(system).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err == nil {
			out[p.Name] = string(data)
		}
	}
	return out
}

// createPool creates the runner pool p (deleted when the spec's container ends) and waits until
// its runners, replicas of them, have connected to the manager.
func createPool(p *v1alpha1.InfraRunnerPool, runners int32) {
	Expect(k8s.Create(ctx, p)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, p) })
	waitConnected(p, runners)
}

// waitConnected waits until the pool's status counts runners connected to the manager (the leader).
func waitConnected(p *v1alpha1.InfraRunnerPool, runners int32) {
	eventually(func() int32 {
		got := &v1alpha1.InfraRunnerPool{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		return got.Status.ConnectedRunners
	}).Should(Equal(runners), "the pool's runners connect to the manager")
}

// pooledClaimReady publishes class (kind, the suite's module, its variable name from the claim) on
// pool, claims it as name in a new namespace of prefix, and returns the claim once Ready is True.
func pooledClaimReady(pool, class, kind, module, prefix, name string) *v1alpha1.InfraClaim {
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete, RunInputs: v1alpha1.RunInputs{RunnerPool: pool},
			Module:    v1alpha1.ModuleSource{Source: modulesURL + "//modules/" + module, Version: "v0.1.0"},
			Variables: v1alpha1.Variables{"name": {Raw: []byte(`"${claim.namespace}-${claim.name}"`)}}},
	}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, c) })
	claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: newNamespace(prefix), Name: name},
		Spec: v1alpha1.InfraClaimSpec{ResourceKind: kind}}
	Expect(k8s.Create(ctx, claim)).To(Succeed())
	eventually(func() string {
		got := &v1alpha1.InfraClaim{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
		return readyCondition(got.Status.Conditions)
	}).Should(HavePrefix("True"))
	return claim
}

var _ = Describe("Runner pools on the cluster", Ordered, func() {
	const pool, sa = "e2e", "e2e-runner"

	BeforeAll(func() {
		Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: sa}})).To(Succeed())
		// What the pool grants its runs (issue 45): a variable, and a ConfigMap mounted read-only.
		Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: "e2e-pool"},
			Data: map[string]string{"mark": "mounted"}})).To(Succeed())
		p := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: pool},
			Spec: v1alpha1.InfraRunnerPoolSpec{Replicas: ptr.To[int32](2), Concurrency: 1, ServiceAccountName: sa,
				PodLabels: map[string]string{"e2e.conductor.io/pool": "labelled"},
				Env:       []corev1.EnvVar{{Name: "E2E_POOL_MARK", Value: "granted"}},
				Volumes: []corev1.Volume{{Name: "e2e-pool", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "e2e-pool"}}}}},
				VolumeMounts: []v1alpha1.RunnerVolumeMount{{Name: "e2e-pool", MountPath: "/etc/e2e-pool"}}}}
		createPool(p, 2)
	})

	It("provisions and reclaims a class's claim in a runner pod, whose local-exec finds no Kubernetes credentials", func() {
		claim := pooledClaimReady(pool, "e2e-probe", "E2EProbe", "nocredentials", "e2e-pool-", "probe")
		res := resourceOf(claim)
		Expect(res.Spec.RunnerPool).To(Equal(pool))
		Expect(strings.Join(slices.Collect(maps.Values(runnerLogs(pool))), "\n")).To(ContainSubstring(`"key":"`+res.Name+`"`), "the apply ran in a runner pod")

		Expect(k8s.Delete(ctx, claim)).To(Succeed())
		eventually(func() bool {
			return k8s.Get(ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) != nil
		}).Should(BeTrue(), "the runner destroyed it and the resource went")
	})

	It("a run on the pool gets what the pool grants and nothing else of the runner's: its env, its mounted volume, not POD_NAME", func() {
		for _, p := range runnerPods(pool) {
			Expect(p.Labels).To(HaveKeyWithValue("e2e.conductor.io/pool", "labelled"))
		}
		pooledClaimReady(pool, "e2e-pool-grants", "E2EPoolGrants", "poolgrants", "e2e-pool-grants-", "grants")
	})

	It("a run on the pool finds no token to read: not the runner's run-protocol token, not the manager's", func() {
		found, canI, dialed := huntTokens("pool", pool)
		Expect(found).To(BeEmpty(), "the run read tokens; with them the API server allows:\n%s", canI)
		By("dialing the manager as a runner of its own pool, to take the pool's other runs: no token to dial with")
		// The allow-list opens neither the manager's CA under /var/run/conductor-tf nor the runner's
		// token there: the dial stops at the first of them it reads.
		Expect(dialed).To(ContainSubstring("permission denied"), dialed)
		Expect(dialed).NotTo(ContainSubstring("run starting"))
	})

	It("a rollout of the manager during creates on the pool: the runners' applies finish, all Ready, no hold, no lock, each created once", func() {
		ledgerClass("e2e-rollout-pooled", "E2ERolloutPooled", pool)
		rolloutDuringCreates("E2ERolloutPooled", "e2e-rollout-pool-")
	})

	It("a runner pod deleted mid-apply: the run is retried on the other runner, no lock is held, nothing is created twice without approval", func() {
		kind := "E2EPooledSlow"
		slowClass("e2e-pooled-slow", kind, func(c *v1alpha1.InfraClass) { c.Spec.RunnerPool = pool })
		claim := slowClaim(newNamespace("e2e-pool-kill-"), "app", kind, "round-0")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		eventually(converged(claim, "round-0")).Should(HavePrefix("True"))
		Expect(resourceOf(claim).Spec.RunnerPool).To(Equal(pool))
		first := password(claim)

		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		greet(claim, "round-1")
		Expect(k8s.Update(ctx, claim)).To(Succeed())
		approved := map[string]bool{}
		var victim string
		eventually(func() string {
			res := resourceOf(claim)
			if len(res.Status.CreatesPending) == 0 { // the slow create (6 s) is recorded as started
				return ""
			}
			for name, log := range runnerLogs(pool) {
				if res.Status.LastRun != nil && res.Status.LastRun.Result == v1alpha1.RunRunning &&
					strings.Contains(log, `"run starting"`) && strings.Contains(log, res.Status.LastRun.ID) {
					victim = name
				}
			}
			return victim
		}).ShouldNot(BeEmpty())
		deleted := time.Now()
		Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: victim}}, client.GracePeriodSeconds(0))).To(Succeed())
		GinkgoWriter.Printf("deleted runner pod %s mid-apply\n", victim)
		eventually(func() string {
			approveHeld(resourceOf(claim), approved)
			return converged(claim, "round-1")()
		}).Should(HavePrefix("True"))
		GinkgoWriter.Printf("converged %s after the runner pod was deleted; %d held plan(s) approved\n", time.Since(deleted).Round(time.Second), len(approved))
		Expect(locksHeld(claim)).To(BeEmpty())
		if password(claim) != first {
			Expect(approved).NotTo(BeEmpty(), "the password was created twice without an approval")
		}
		Expect(fmt.Sprint(resourceOf(claim).Status.LastRun.Result)).To(Equal("Succeeded"))
	})
})
