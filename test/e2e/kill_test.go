//go:build e2e

package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// slowClass publishes a class over the suite's slowpass module: every change of a claim's greeting
// is an apply of several seconds.
func slowClass(name, kind string, mutate ...func(*v1alpha1.InfraClass)) *v1alpha1.InfraClass {
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module: v1alpha1.ModuleSource{Source: modulesURL + "//modules/slowpass", Version: "v0.1.0"},
			Variables: v1alpha1.Variables{
				"name":     {Raw: []byte(`"${claim.namespace}-${claim.name}"`)},
				"greeting": {Raw: []byte(`"${claim.spec.parameters.greeting}"`)},
			},
			Operations: v1alpha1.Operations{AllowDestructiveChanges: true}},
	}
	for _, m := range mutate {
		m(c)
	}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, c) })
	eventually(func() string {
		got := &v1alpha1.InfraClass{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		return readyCondition(got.Status.Conditions)
	}).Should(HavePrefix("True"))
	return c
}

func slowClaim(ns, name, kind, greeting string) *v1alpha1.InfraClaim {
	return &v1alpha1.InfraClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.InfraClaimSpec{ResourceKind: kind,
			Parameters:                 v1alpha1.Variables{"greeting": {Raw: []byte(fmt.Sprintf("%q", greeting))}},
			WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: name + "-conn"}},
	}
}

func greet(c *v1alpha1.InfraClaim, greeting string) {
	c.Spec.Parameters["greeting"] = apiextensionsv1.JSON{Raw: []byte(fmt.Sprintf("%q", greeting))}
}

// converged reports whether the claim is Ready with its resource's last apply done for greeting:
// the connection Secret holds greeting and the resource records its last run Succeeded. The
// Secret alone is not enough: it is written before the run's outcome (a claim stays Ready through
// an update), so for a moment it is new while status.lastRun still says Running.
func converged(c *v1alpha1.InfraClaim, greeting string) func() string {
	return func() string {
		got := &v1alpha1.InfraClaim{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		secret := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.WriteConnectionSecretToRef.Name}, secret); err != nil {
			return "no connection Secret: " + err.Error()
		}
		if g := string(secret.Data["greeting"]); g != greeting {
			return "connection Secret greeting " + g
		}
		res := &v1alpha1.InfraResource{}
		if got.Spec.ResourceName != "" {
			_ = k8s.Get(ctx, client.ObjectKey{Name: got.Spec.ResourceName}, res)
		}
		if last := res.Status.LastRun; last == nil || last.Result != v1alpha1.RunSucceeded {
			return fmt.Sprintf("the resource's last run is not Succeeded: %+v", last)
		}
		return readyCondition(got.Status.Conditions)
	}
}

// password is the connection Secret's password.
func password(c *v1alpha1.InfraClaim) string {
	secret := &corev1.Secret{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.WriteConnectionSecretToRef.Name}, secret)).To(Succeed())
	return string(secret.Data["password"])
}

// resourceOf is the claim's resource now.
func resourceOf(c *v1alpha1.InfraClaim) *v1alpha1.InfraResource {
	got := &v1alpha1.InfraClaim{}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	res := &v1alpha1.InfraResource{}
	if got.Spec.ResourceName == "" {
		return res
	}
	_ = k8s.Get(ctx, client.ObjectKey{Name: got.Spec.ResourceName}, res)
	return res
}

// approveHeld approves a plan held because a killed run had started creating (as an operator
// would after checking for a duplicate) and reports whether it did.
func approveHeld(res *v1alpha1.InfraResource, approved map[string]bool) bool {
	pp := res.Status.PendingPlan
	if pp == nil || pp.Reason != v1alpha1.ReasonInterruptedCreate || approved[pp.ID] {
		return false
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationApprovePlan, pp.ID)
	Expect(k8s.Patch(ctx, res.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	approved[pp.ID] = true
	GinkgoWriter.Printf("approved held plan %s of %s: %v\n", pp.ID, res.Name, pp.Changes)
	return true
}

// managerPods lists the manager's pods that are not being deleted.
func managerPods() []corev1.Pod {
	pods := &corev1.PodList{}
	Expect(k8s.List(ctx, pods, client.InNamespace(system), client.MatchingLabels{"control-plane": "controller-manager"})).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// locksHeld lists the state locks (Leases lock-tfstate-*) someone holds.
func locksHeld(of ...*v1alpha1.InfraClaim) []string {
	leases, err := kube.CoordinationV1().Leases(system).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	// Only the given claims' states, when claims are given: another spec's resource may be in a
	// reclaim's destroy, holding its lock, when this one looks (seen in CI after the adopt spec).
	var names []string
	for _, c := range of {
		if res := resourceOf(c); res.Name != "" {
			names = append(names, "-"+res.Name)
		}
	}
	ours := func(lease string) bool {
		if len(of) == 0 {
			return true
		}
		return slices.ContainsFunc(names, func(suffix string) bool { return strings.HasSuffix(lease, suffix) })
	}
	var held []string
	for _, l := range leases.Items {
		if strings.HasPrefix(l.Name, "lock-tfstate-") && ours(l.Name) && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			held = append(held, l.Name+" by "+*l.Spec.HolderIdentity)
		}
	}
	return held
}

var _ = Describe("The manager pod deleted in the middle of applies", Ordered, func() {
	It("five times with grace 0: the claim converges, no lock is held, nothing is created twice without an approval", func() {
		kind := "E2ESlow"
		slowClass("e2e-slow", kind)
		claim := slowClaim(newNamespace("e2e-kill-"), "app", kind, "round-0")
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		eventually(converged(claim, "round-0")).Should(HavePrefix("True"))
		first := password(claim)
		approved := map[string]bool{}
		start := time.Now()
		// A round counts when its kill landed mid-create. Under load the kubelet may stop the pod
		// only after the 6 s create ended (seen in CI: "the run the kill was meant for finished
		// first"); such a round proves nothing and is tried again, up to 3 more times in all.
		landed, tries, want := 0, 0, "round-0"
		for round := 1; landed < 5; round++ {
			tries++
			Expect(tries).To(BeNumerically("<=", 8), "5 of 8 kills land mid-create")
			Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
			greet(claim, fmt.Sprintf("round-%d", round))
			Expect(k8s.Update(ctx, claim)).To(Succeed())
			// Mid-create: the run is Running and the slow object's create is recorded as started
			// (it takes 6 s), so the kill lands while it goes on.
			var killed string
			eventually(func() string {
				res := resourceOf(claim)
				approveHeld(res, approved)
				if l := res.Status.LastRun; l != nil && l.Result == v1alpha1.RunRunning && len(res.Status.CreatesPending) > 0 && res.Status.CreatesPendingRun == l.ID {
					killed = l.ID
				}
				return killed
			}).ShouldNot(BeEmpty())
			pods := managerPods()
			Expect(pods).NotTo(BeEmpty())
			for _, p := range pods {
				Expect(k8s.Delete(ctx, &p, client.GracePeriodSeconds(0))).To(Succeed())
			}
			GinkgoWriter.Printf("round %d: deleted %d manager pod(s) with grace 0 during %s\n", round, len(pods), resourceOf(claim).Status.LastRun.Operation)
			kubectl("-n", system, "rollout", "status", "deployment/"+deployment, "--timeout=5m")
			// The kill landed mid-create: the killed run never finished (no record of it succeeding).
			if l := resourceOf(claim).Status.LastRun; l != nil && l.ID == killed && l.Result == v1alpha1.RunSucceeded {
				GinkgoWriter.Printf("round %d: the run the kill was meant for finished first; not counted\n", round)
				eventually(converged(claim, fmt.Sprintf("round-%d", round))).Should(HavePrefix("True"))
				continue
			}
			landed++
			want = fmt.Sprintf("round-%d", round)
		}
		eventually(func() string {
			approveHeld(resourceOf(claim), approved)
			return converged(claim, want)()
		}).Should(HavePrefix("True"))
		GinkgoWriter.Printf("converged %s after the first kill; %d held plan(s) approved\n", time.Since(start).Round(time.Second), len(approved))
		Expect(locksHeld(claim)).To(BeEmpty())
		if password(claim) != first {
			Expect(approved).NotTo(BeEmpty(), "the password was created twice without an approval")
		}
	})
})
