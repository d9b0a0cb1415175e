//go:build e2e

package e2e_test

import (
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// sample returns the sample class and claim named so, with the module source served to the pods.
func sample(class, claim string) (*v1alpha1.InfraClass, *v1alpha1.InfraClaim) {
	samples, err := harness.LoadSamples(modulesURL)
	Expect(err).NotTo(HaveOccurred())
	c, cl, err := samples.ClassAndClaim(class, claim)
	Expect(err).NotTo(HaveOccurred())
	return c, cl
}

func readyCondition(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionReady); c != nil {
		return string(c.Status) + " " + c.Reason + ": " + c.Message
	}
	return ""
}

func newNamespace(prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
