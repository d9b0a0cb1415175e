package lifecycle_test

import (
	"maps"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 46: import identities cannot adopt another claim's object. The claims b-c of namespace a
// and c of namespace a-b render the same `${claim.namespace}-${claim.name}`: a class with such an
// identity is refused before any claim uses it. A class naming the resource gives the two claims
// different identities, rendered again when a parameter they use changes.
var _ = Describe("Import identities are unique per resource", func() {
	It("refuses a class whose identity two claims render alike, and renders resource-named identities apart and again on change", func() {
		s := newScenario()
		shared := fileClass("ids-shared-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Default = false
			c.Spec.ImportIdentities = map[string]string{"local_file.this": "${claim.namespace}-${claim.name}"}
		})
		Expect(k8s.Create(s.ctx, shared)).To(Succeed())
		Eventually(func() metav1.Condition {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(shared), got)).To(Succeed())
			return condition(got.Status.Conditions, v1alpha1.ConditionReady)
		}, timeout).Should(And(HaveField("Status", metav1.ConditionFalse), HaveField("Reason", v1alpha1.ReasonIdentityNotUnique),
			HaveField("Message", ContainSubstring("local_file.this"))))

		unique := fileClass("ids-unique-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Variables["path"] = js(`"${claim.spec.parameters.dir}/${resource.name}.txt"`)
			c.Spec.ImportIdentities = map[string]string{"local_file.this": "${claim.spec.parameters.dir}/${resource.name}.txt"}
		})
		Expect(k8s.Create(s.ctx, unique)).To(Succeed())
		// Namespaces a and a-b, as the colliding pair (prefixed by the scenario's own).
		a, ab := s.ns+"-a", s.ns+"-a-b"
		for _, n := range []string{a, ab} {
			Expect(k8s.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
		}
		first := fileClaim(a, "b-c", s.kind, s.dir, "x")
		second := fileClaim(ab, "c", s.kind, s.dir, "x")
		Expect(k8s.Create(s.ctx, first)).To(Succeed())
		Expect(k8s.Create(s.ctx, second)).To(Succeed())
		_, r1 := s.ready(first)
		_, r2 := s.ready(second)
		Expect(r1.Spec.ClassRef.Name).To(Equal(unique.Name))
		id1, id2 := r1.Spec.ImportIdentities["local_file.this"], r2.Spec.ImportIdentities["local_file.this"]
		Expect(id1).To(Equal(s.dir + "/" + r1.Name + ".txt"))
		Expect(id2).To(Equal(s.dir + "/" + r2.Name + ".txt"))
		Expect(id1).NotTo(Equal(id2))
		Expect(fileContent(id1)).To(ContainSubstring("hello x"), "the identity names the object the variables made")

		By("a new parameter renders the identity again with the variables")
		other := s.dir + "/moved"
		Expect(os.MkdirAll(other, 0o755)).To(Succeed())
		Eventually(func() error {
			c := s.claim(first)()
			c.Spec.Parameters = maps.Clone(c.Spec.Parameters)
			c.Spec.Parameters["dir"] = js(`"` + other + `"`)
			return k8s.Update(s.ctx, c)
		}, timeout).Should(Succeed())
		Eventually(func() string { return s.resource(r1.Name)().Spec.ImportIdentities["local_file.this"] }, timeout).
			Should(Equal(other + "/" + r1.Name + ".txt"))
		Expect(s.resource(r1.Name)().Spec.Variables["path"].Raw).To(MatchJSON(`"` + other + "/" + r1.Name + `.txt"`))
	})
})
