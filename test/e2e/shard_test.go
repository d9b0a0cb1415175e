//go:build e2e

package e2e_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// shardClaims is how many claims the sharding spec creates (issue 51: 60).
const shardClaims = 60

// setManagerArgs replaces the manager container's arguments with edit's result and returns the
// arguments it had.
func setManagerArgs(edit func([]string) []string) []string {
	d := &appsv1.Deployment{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: system, Name: deployment}, d)).To(Succeed())
	c := &d.Spec.Template.Spec.Containers[0]
	Expect(c.Name).To(Equal("manager"))
	old := slices.Clone(c.Args)
	c.Args = edit(slices.Clone(c.Args))
	Expect(k8s.Update(ctx, d)).To(Succeed())
	return old
}

// scaleManager scales the Deployment to n replicas and waits for the rollout.
func scaleManager(n int) {
	kubectl("-n", system, "scale", "deployment/"+deployment, fmt.Sprintf("--replicas=%d", n))
	kubectl("-n", system, "rollout", "status", "deployment/"+deployment, "--timeout=10m")
}

// shardLedger is the slowledger module's class for the sharding spec: a create of `seconds`.
func shardLedger(name, kind string, seconds int) {
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module:    v1alpha1.ModuleSource{Source: modulesURL + "//modules/slowledger", Version: "v0.1.0"},
			RunInputs: v1alpha1.RunInputs{KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: ledgerAccount()}},
			Variables: v1alpha1.Variables{
				"name":      {Raw: []byte(`"${claim.namespace}-${claim.name}"`)},
				"namespace": {Raw: []byte(`"${claim.namespace}"`)},
				"seconds":   {Raw: []byte(fmt.Sprint(seconds))},
			}},
	}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, c) })
}

// runsBy counts, over the claims' resources, the runs under way (Running) by the pod that
// started them, and adds every pod seen running anything to seen.
func runsBy(claims []*v1alpha1.InfraClaim, seen map[string]bool) map[string]int {
	out := map[string]int{}
	for _, c := range claims {
		res := boundResource(c)
		if res == nil || res.Status.LastRun == nil {
			continue
		}
		seen[res.Status.LastRun.Controller] = true
		if res.Status.LastRun.Result == v1alpha1.RunRunning {
			out[res.Status.LastRun.Controller]++
		}
	}
	return out
}

// createsBy counts, over the claims' resources, the creates under way by the pod that runs them:
// a Running record whose run has started (its slot taken, not waiting in line) and recorded a
// create begun (status.createsPending), the run a replica deleted mid-apply leaves in doubt.
func createsBy(claims []*v1alpha1.InfraClaim) map[string]int {
	out := map[string]int{}
	for _, c := range claims {
		res := boundResource(c)
		if res == nil || res.Status.LastRun == nil {
			continue
		}
		if last := res.Status.LastRun; last.Result == v1alpha1.RunRunning && last.StartTime != nil && len(res.Status.CreatesPending) > 0 {
			out[last.Controller]++
		}
	}
	return out
}

// bucketHolders counts the bucket Leases by holder ("" for none).
func bucketHolders() map[string]int {
	leases, err := kube.CoordinationV1().Leases(system).List(ctx, metav1.ListOptions{LabelSelector: "conductor.io/shard=bucket"})
	Expect(err).NotTo(HaveOccurred())
	out := map[string]int{}
	for _, l := range leases.Items {
		h := ""
		if l.Spec.HolderIdentity != nil {
			h = *l.Spec.HolderIdentity
		}
		out[h]++
	}
	return out
}

// Issue 51 item 2: every replica works on its share of the resources; scaling the Deployment
// (2 → 3 → 1) and a replica deleted mid-apply move shares without a lost, doubled or stuck run.
var _ = Describe("Sharded replicas", Ordered, func() {
	BeforeAll(func() {
		old := setManagerArgs(func(args []string) []string {
			args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--run-protocol-address") })
			// Four runs at once per replica: the creates mostly sleep, and 60 of them on two
			// slots would keep the spec for a quarter of an hour.
			args = slices.DeleteFunc(args, func(a string) bool { return strings.HasPrefix(a, "--max-concurrent-runs") })
			return append(args, "--run-protocol-address=", "--shard-buckets=256", "--max-concurrent-runs=4")
		})
		DeferCleanup(func() {
			setManagerArgs(func([]string) []string { return old })
			scaleManager(1)
		})
		scaleManager(2)
	})

	It("divides 60 claims among the replicas, and survives a scale-up, a replica deleted mid-apply and a scale-down: each created once, all Ready, no lock held", func() {
		const kind = "E2EShard"
		shardLedger("e2e-shard", kind, 10)
		ns := newNamespace("e2e-shard-")
		var claims []*v1alpha1.InfraClaim
		start := time.Now()
		for i := range shardClaims {
			c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("c%02d", i)},
				Spec: v1alpha1.InfraClaimSpec{ResourceKind: kind}}
			Expect(k8s.Create(ctx, c)).To(Succeed())
			claims = append(claims, c)
		}
		DeferCleanup(reclaimAll, ns, kind)
		seen := map[string]bool{}
		eventually(func() int { return len(runsBy(claims, seen)) }).Should(Equal(2), "both replicas run creates of their shares")
		GinkgoWriter.Printf("2 replicas: runs under way by pod %v; bucket Leases by holder %v\n", runsBy(claims, seen), bucketHolders())

		By("scaling to 3 replicas during the creates")
		scaleManager(3)
		eventually(func() int { return len(bucketHolders()) }).Should(Equal(3), "three replicas hold buckets")
		eventually(func() int { runsBy(claims, seen); return len(seen) }).Should(Equal(3), "the third replica runs creates of its share")
		GinkgoWriter.Printf("3 replicas: runs under way by pod %v; bucket Leases by holder %v\n", runsBy(claims, seen), bucketHolders())

		By("deleting a replica mid-apply, without grace")
		// The victim has a create under way (started, not waiting for a slot): a run in line
		// would test nothing the scale-down does not.
		var victim string
		var creates int
		eventually(func() string {
			for pod, n := range createsBy(claims) {
				if n > 0 && slices.ContainsFunc(managerPods(), func(p corev1.Pod) bool { return p.Name == pod }) {
					victim, creates = pod, n
				}
			}
			return victim
		}).ShouldNot(BeEmpty())
		Expect(k8s.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: system, Name: victim}}, client.GracePeriodSeconds(0))).To(Succeed())
		deleted := time.Now()
		GinkgoWriter.Printf("deleted %s with grace 0 while it ran %d create(s) under way\n", victim, creates)
		kubectl("-n", system, "rollout", "status", "deployment/"+deployment, "--timeout=10m")

		By("scaling down to 1 replica")
		scaleManager(1)
		scaledDown := time.Now()

		// A create the deleted replica had under way is in doubt: its new owner holds the plan
		// (InterruptedCreate) and an operator approves it, as the kill specs do. Its object may then
		// be in the ledger twice: the one the killed run created and the one the approved plan does.
		approved, inDoubt := map[string]bool{}, map[string]bool{}
		eventually(func() int {
			ready := 0
			for _, c := range claims {
				if res := boundResource(c); res != nil && approveHeld(res, approved) {
					inDoubt[c.Name] = true
				}
				got := &v1alpha1.InfraClaim{}
				Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
				if strings.HasPrefix(readyCondition(got.Status.Conditions), "True") {
					ready++
				}
			}
			return ready
		}).WithTimeout(15*time.Minute).Should(Equal(shardClaims), "every claim Ready")
		pods := managerPods()
		Expect(pods).To(HaveLen(1))
		GinkgoWriter.Printf("all %d claims Ready %s after they were created (%s after the deletion, %s after the scale-down); pods that ran creates: %v; held plans approved: %d\n",
			shardClaims, time.Since(start).Round(time.Second), time.Since(deleted).Round(time.Second), time.Since(scaledDown).Round(time.Second), sortedKeys(seen), len(approved))
		Expect(len(seen)).To(BeNumerically(">=", 3), "creates ran on every replica")
		twice := []string{}
		for _, c := range claims {
			n := ledgerEntries(c)
			if inDoubt[c.Name] {
				GinkgoWriter.Printf("%s: create in doubt approved; ledger %d\n", c.Name, n)
				if n >= 1 && n <= 2 {
					continue
				}
			}
			if n != 1 {
				twice = append(twice, fmt.Sprintf("%s: %d", c.Name, n))
				GinkgoWriter.Printf("%s: ledger %d, never held:\n%s", c.Name, n, doubledReport(c))
			}
		}
		Expect(twice).To(BeEmpty(), "every claim's object created exactly once (the ledger), but for creates in doubt an operator approved")
		Expect(locksHeld(claims...)).To(BeEmpty())
		eventually(bucketHolders).Should(Equal(map[string]int{holderOf(pods[0]): 256}), func() string {
			return "the last replica holds every bucket\n" + shardReport()
		})
	})
})

// reclaimAll deletes the claims of namespace ns and waits until the resources of kind are gone
// (reclaimed: destroyed, with the class's Delete policy). The sharding spec's 60 resources would
// otherwise stay with the one manager of the specs that run after it, whose drift checks of them
// (60 plans every sync interval) take the CPU those specs' leader hand-overs are timed on.
func reclaimAll(ns, kind string) {
	start := time.Now()
	Expect(k8s.DeleteAllOf(ctx, &v1alpha1.InfraClaim{}, client.InNamespace(ns))).To(Succeed())
	eventually(func() []string {
		list := &v1alpha1.InfraResourceList{}
		Expect(k8s.List(ctx, list)).To(Succeed())
		var left []string
		for _, r := range list.Items {
			if r.Spec.ResourceKind == kind {
				left = append(left, r.Name)
			}
		}
		return left
	}).WithTimeout(10*time.Minute).Should(BeEmpty(), "every resource of %s reclaimed", kind)
	GinkgoWriter.Printf("the claims of %s reclaimed in %s\n", ns, time.Since(start).Round(time.Second))
}

// shardReport says, for a failed check of the buckets, what each replica is: every manager pod
// (terminating ones too) with its deletion time and container state, every member Lease with its
// renewal and leaving mark, and the end of the log of each pod that is not the survivor — a
// replica that still holds buckets after its pod was deleted shows there what it was doing.
func shardReport() string {
	var b strings.Builder
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(system), client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: phase %s, deleted %v", p.Name, p.Status.Phase, p.DeletionTimestamp)
		for _, cs := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, ", %s restarts %d running %v terminated %v", cs.Name, cs.RestartCount, cs.State.Running != nil, cs.State.Terminated)
		}
		b.WriteString("\n")
		if p.DeletionTimestamp != nil {
			tail := int64(60)
			data, err := kube.CoreV1().Pods(system).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
			fmt.Fprintf(&b, "  its log's end (err %v):\n%s\n", err, data)
		}
	}
	leases, err := kube.CoordinationV1().Leases(system).List(ctx, metav1.ListOptions{LabelSelector: "conductor.io/shard=member"})
	Expect(err).NotTo(HaveOccurred())
	for _, l := range leases.Items {
		fmt.Fprintf(&b, "member Lease %s: holder %v renewed %v annotations %v\n", l.Name, ptrString(l.Spec.HolderIdentity), l.Spec.RenewTime, l.Annotations)
	}
	return b.String()
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// holderOf is the shard identity of the manager pod (its log's "sharding resources" line).
func holderOf(p corev1.Pod) string {
	data, err := kube.CoreV1().Pods(system).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(data), "\n") {
		if i := strings.Index(line, `"identity": "`); i >= 0 && strings.Contains(line, "sharding resources") {
			rest := line[i+len(`"identity": "`):]
			return rest[:strings.Index(rest, `"`)]
		}
	}
	Fail("no sharding line in the log of " + p.Name)
	return ""
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
