//go:build e2e

package e2e_test

import (
	"encoding/json"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// e2eClass publishes a class of kind over one of the e2e modules, its variables given, and
// deletes it when the spec ends.
func e2eClass(name, kind, module string, vars map[string]string) {
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module: v1alpha1.ModuleSource{Source: modulesURL + "//modules/" + module, Version: "v0.1.0"}, Variables: v1alpha1.Variables{}},
	}
	for k, v := range vars {
		raw, err := json.Marshal(v)
		Expect(err).NotTo(HaveOccurred())
		c.Spec.Variables[k] = apiextensionsv1.JSON{Raw: raw}
	}
	Expect(k8s.Create(ctx, c)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, c) })
}

// readyClaimSecret makes a claim of kind in namespace ns (deleted when the spec ends), waits until it
// is Ready and returns it and its connection Secret's data.
func readyClaimSecret(ns, name, kind string) (*v1alpha1.InfraClaim, map[string][]byte) {
	claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.InfraClaimSpec{ResourceKind: kind, WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: name + "-conn"}}}
	Expect(k8s.Create(ctx, claim)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, claim) })
	eventually(func() string {
		got := &v1alpha1.InfraClaim{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), got)).To(Succeed())
		return readyCondition(got.Status.Conditions)
	}).Should(HavePrefix("True"))
	secret := &corev1.Secret{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-conn"}, secret)).To(Succeed())
	return claim, secret.Data
}

var _ = Describe("A compromised module in the manager's pod", func() {
	It("writes nothing other classes' runs execute, reads no /proc, signals not the manager; another class's claim then becomes Ready (issue 44)", func() {
		// The victim: the slowpass module (the random provider, kept warm, and a local-exec).
		slowClass("e2e-victim", "E2EVictim")
		victims := newNamespace("e2e-victim-")
		first := slowClaim(victims, "first", "E2EVictim", "first")
		Expect(k8s.Create(ctx, first)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, first) })
		eventually(converged(first, "first")).Should(HavePrefix("True"))

		// What the hostile run goes for, listed from inside the manager's container.
		listed := kubectl("-n", system, "exec", "deploy/"+deployment, "-c", "manager", "--",
			"find", "/work/runs/.modules", "/work/plugin-cache", "-not", "-type", "l")
		targets := strings.Fields(listed)
		Expect(len(targets)).To(BeNumerically(">", 5), "the victim's shared init is on disk: %s", listed)

		e2eClass("e2e-hostile", "E2EHostile", "hostile", map[string]string{"name": "${claim.name}", "targets": strings.Join(targets, " ")})
		_, out := readyClaimSecret(newNamespace("e2e-hostile-"), "attack", "E2EHostile")
		report := string(out["report"])
		GinkgoWriter.Printf("the hostile run's report:\n%s\n", report)
		var tried int
		for _, line := range strings.Split(strings.TrimSpace(report), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "write":
				tried++
				Expect(f[2]).To(Equal("denied"), "the hostile run wrote %s", f[1])
			case len(f) == 3 && f[0] == "proc":
				Expect(f[2]).To(Equal("denied"), "the hostile run read %s", f[1])
			case len(f) == 2 && f[0] == "signal":
				Expect(f[1]).NotTo(Equal("1"), "the hostile run can signal the manager (PID 1 of its container)")
			}
		}
		Expect(tried).To(Equal(len(targets)+3), "every target was tried")

		By("the other class's next claim runs nothing planted and becomes Ready")
		second := slowClaim(victims, "second", "E2EVictim", "second")
		Expect(k8s.Create(ctx, second)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, second) })
		eventually(converged(second, "second")).Should(HavePrefix("True"))
	})
})
