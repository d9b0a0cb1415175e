package lifecycle_test

import (
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

var _ = Describe("Names and templates users actually write", func() {
	It("a claim with a 253-character name provisions, binds and becomes Ready", func() {
		s := newScenario()
		// A file name cannot be 253 characters long: this class names the file after the claim's first 20.
		Expect(k8s.Create(s.ctx, fileClass(strings.Repeat("c", 200)+"."+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Variables["path"] = js(`"${claim.spec.parameters.dir}/${substr(claim.name, 0, 20)}.txt"`)
		}))).To(Succeed())
		name := strings.Repeat("a", 120) + "." + strings.Repeat("b", 132)
		Expect(name).To(HaveLen(253))
		claim := fileClaim(s.ns, name, s.kind, s.dir, "long")
		claim.Spec.WriteConnectionSecretToRef.Name = "long-conn"
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		got, res := s.ready(claim)
		Expect(got.Status.ResourceName).To(Equal(res.Name))
		Expect(res.Labels).To(HaveKeyWithValue(v1alpha1.LabelClaimName, v1alpha1.LabelValue(name)))
		Expect(res.Labels[v1alpha1.LabelClaimName]).To(HaveLen(63))
		Expect(fileContent(filepath.Join(s.dir, name[:20]+".txt"))).To(Equal("hello long"))
		Expect(k8s.Delete(s.ctx, got)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, res) }), timeout, time.Second).Should(BeTrue())
	})

	It("a class template that calls a function that does not exist is Ready=False when it is checked, and provisions nothing", func() {
		s := newScenario()
		class := fileClass("nofn-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Variables["content"] = js(`"${shout(claim.name)}"`)
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		Eventually(func() metav1.Condition {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			return condition(got.Status.Conditions, v1alpha1.ConditionReady)
		}, timeout, time.Second).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1alpha1.ReasonTemplateInvalid),
			HaveField("Message", ContainSubstring(`unknown function "shout"`))))
		claim := fileClaim(s.ns, "nofn", s.kind, s.dir, "x")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		Consistently(func() string { return s.claim(claim)().Status.ResourceName }, 3*time.Second, time.Second).Should(BeEmpty())
	})
})
