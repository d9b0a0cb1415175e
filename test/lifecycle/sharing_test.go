package lifecycle_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 68, shared resources, on real tofu and the file module: the class's module makes the
// "server" (a file and its random password), the per-claim module each claim's own file, which
// holds the server's password read from the shared resource's connection Secret (its sensitive
// output, passed as the per-claim module's secret_word).

// sharedFileClass is a sharing class over the file module: the server a file named after the
// shared resource, each claim's share a file of its own holding the server's password.
func sharedFileClass(s *scenario, maxClaims int32, mutate ...func(*v1alpha1.InfraClass)) *v1alpha1.InfraClass {
	return fileClass("shared-"+s.ns, s.kind, v1alpha1.ReclaimDelete, append([]func(*v1alpha1.InfraClass){func(c *v1alpha1.InfraClass) {
		// The shared resource is rendered for no claim: the server's file is named after it.
		c.Spec.Variables = v1alpha1.Variables{
			"path":    js(fmt.Sprintf("%q", s.dir+"/${resource.name}.txt")),
			"content": js(`"server"`),
		}
		c.Spec.Sharing = &v1alpha1.ClassSharing{MaxClaims: maxClaims, PerClaim: v1alpha1.PerClaimModule{
			Module: v1alpha1.ModuleSource{Source: moduleDir, Version: "v1.0.0"},
			Variables: v1alpha1.Variables{
				"path":    js(`"${claim.spec.parameters.dir}/${claim.namespace}-${claim.name}.txt"`),
				"content": js(`"bucket of ${claim.name}"`),
			},
			SharedOutputs: []v1alpha1.SharedOutput{{Output: "password", Variable: "secret_word"}},
		}}
	}}, mutate...)...)
}

var _ = Describe("Shared resources on real tofu", func() {
	It("a share follows a changed non-sensitive output of its shared resource", func() {
		s := newScenario()
		class := sharedFileClass(s, 2, func(c *v1alpha1.InfraClass) {
			delete(c.Spec.Sharing.PerClaim.Variables, "content")
			c.Spec.Sharing.PerClaim.SharedOutputs = []v1alpha1.SharedOutput{{Output: "content_sha256", Variable: "content"}}
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		claim := fileClaim(s.ns, "follows", s.kind, s.dir, "")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, share := s.ready(claim)
		sharedName := share.Labels[v1alpha1.LabelShareOf]
		path := filepath.Join(s.dir, s.ns+"-follows.txt")
		sha := func() string {
			var v string
			Expect(json.Unmarshal(s.resource(sharedName)().Status.Outputs["content_sha256"].Raw, &v)).To(Succeed())
			return v
		}
		first := sha()
		Expect(fileContent(path)).To(Equal(first), "the share's file holds the server's content_sha256, passed as a value")

		By("the server's content changes: its content_sha256 output changes, and the share applies the new value")
		Eventually(func() error {
			r := s.resource(sharedName)()
			r.Spec.Variables["content"] = js(`"server v2"`)
			return k8s.Update(s.ctx, r)
		}, timeout).Should(Succeed())
		Eventually(sha, timeout, time.Second).ShouldNot(Equal(first))
		Eventually(func() string { return fileContent(path) }, timeout, time.Second).Should(Equal(sha()))
		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: sharedName}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
	})

	It("a shared resource whose first apply waits for approval is kept while its claim waits (past the grace many times), and serves the claim once approved", func() {
		s := newScenario()
		class := sharedFileClass(s, 2, func(c *v1alpha1.InfraClass) { c.Spec.Approval = v1alpha1.ApprovalManual })
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		claim := fileClaim(s.ns, "waits", s.kind, s.dir, "")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		var sharedName string
		Eventually(func() string {
			list := &v1alpha1.InfraResourceList{}
			Expect(k8s.List(s.ctx, list, client.MatchingLabels{v1alpha1.LabelSharedOf: class.Name})).To(Succeed())
			if len(list.Items) == 1 && list.Items[0].Status.PendingPlan != nil {
				sharedName = list.Items[0].Name
			}
			return sharedName
		}, timeout, 200*time.Millisecond).ShouldNot(BeEmpty(), "the server's plan is held for approval")
		// The suite's sharing grace is 3 s: four times that, the held server stays, and is the only one.
		Consistently(func() int {
			list := &v1alpha1.InfraResourceList{}
			Expect(k8s.List(s.ctx, list, client.MatchingLabels{v1alpha1.LabelSharedOf: class.Name})).To(Succeed())
			if len(list.Items) != 1 || list.Items[0].Name != sharedName || !list.Items[0].DeletionTimestamp.IsZero() {
				return 0
			}
			return 1
		}, 12*time.Second, 250*time.Millisecond).Should(Equal(1), "a shared resource its claim waits for is never deleted under it")
		Expect(condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionBound).Reason).To(Equal(v1alpha1.ReasonWaitingForShared))

		approveNext(s, sharedName, "")
		share := v1alpha1.SharedPlace(sharedName, 0)
		Eventually(func() string { return s.claim(claim)().Spec.ResourceName }, timeout, 200*time.Millisecond).Should(Equal(share))
		approveNext(s, share, "") // the class's Manual approval holds the share's plan too
		_, res := s.ready(claim)
		Expect(fileContent(filepath.Join(s.dir, s.ns+"-waits.txt"))).To(HavePrefix("bucket of waits\n"))
		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: sharedName}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{})).NotTo(Succeed())
	})

	It("two namespaces' claims share one server, each with its own file and password; a claim's release destroys its share alone, the last one the server", func() {
		s := newScenario()
		other := newScenario()
		class := sharedFileClass(s, 2)
		Expect(k8s.Create(s.ctx, class)).To(Succeed())

		a := fileClaim(s.ns, "team-a", s.kind, s.dir, "")
		b := fileClaim(other.ns, "team-b", s.kind, s.dir, "")
		Expect(k8s.Create(s.ctx, a)).To(Succeed())
		Expect(k8s.Create(s.ctx, b)).To(Succeed())
		a, aRes := s.ready(a)
		b, bRes := s.ready(b)
		Expect(aRes.Labels[v1alpha1.LabelShareOf]).To(Equal(bRes.Labels[v1alpha1.LabelShareOf]), "one shared resource for both")
		sharedName := aRes.Labels[v1alpha1.LabelShareOf]
		sharedRes := s.resource(sharedName)()
		Expect(sharedRes.Spec.ClaimRef).To(BeNil())
		Expect(sharedRes.Status.Phase).To(Equal(v1alpha1.ResourceAvailable))
		serverPath := filepath.Join(s.dir, sharedName+".txt")
		serverConn := &corev1.Secret{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: stateNamespace, Name: sharedName}, serverConn)).To(Succeed())
		serverPassword := string(serverConn.Data["password"])
		Expect(serverPassword).To(HaveLen(20))
		Expect(fileContent(serverPath)).To(Equal("server"))

		By("each claim's file holds its own content and the server's password; its connection Secret holds its own outputs")
		conn := func(c *v1alpha1.InfraClaim) *corev1.Secret {
			sec := &corev1.Secret{}
			Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name + "-conn"}, sec)).To(Succeed())
			return sec
		}
		aPath, bPath := filepath.Join(s.dir, s.ns+"-team-a.txt"), filepath.Join(s.dir, other.ns+"-team-b.txt")
		Expect(fileContent(aPath)).To(Equal("bucket of team-a\n" + serverPassword))
		Expect(fileContent(bPath)).To(Equal("bucket of team-b\n" + serverPassword))
		aConn, bConn := conn(a), conn(b)
		Expect(string(aConn.Data["path"])).To(Equal(aPath))
		Expect(string(bConn.Data["path"])).To(Equal(bPath))
		Expect(aConn.Data["password"]).NotTo(Equal(bConn.Data["password"]), "each claim's password is its own")
		Expect(string(aConn.Data["password"])).NotTo(Equal(serverPassword))
		for _, obj := range []any{a, b, aRes, bRes, sharedRes} {
			raw, _ := json.Marshal(obj)
			Expect(string(raw)).NotTo(ContainSubstring(serverPassword), "the server's password is in no object")
		}
		GinkgoWriter.Printf("claims %s/team-a and %s/team-b share %s: shares %s, %s\n", s.ns, other.ns, sharedName, aRes.Name, bRes.Name)

		By("a third claim: the server is full (2 places), a second server is made")
		c := fileClaim(s.ns, "team-c", s.kind, s.dir, "")
		Expect(k8s.Create(s.ctx, c)).To(Succeed())
		_, cRes := s.ready(c)
		Expect(cRes.Labels[v1alpha1.LabelShareOf]).NotTo(Equal(sharedName))
		Expect(k8s.Delete(s.ctx, c)).To(Succeed())

		By("team-a released: its share is destroyed, the server and team-b's file stay")
		Expect(k8s.Delete(s.ctx, a)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: aRes.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Expect(fileContent(aPath)).To(HavePrefix("<"))
		Consistently(func() string { return fileContent(serverPath) }, "5s").Should(Equal("server"))
		Expect(fileContent(bPath)).To(HavePrefix("bucket of team-b"))

		By("team-b released, the last: its share, then the server, are destroyed")
		Expect(k8s.Delete(s.ctx, b)).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: sharedName}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Expect(fileContent(bPath)).To(HavePrefix("<"))
		Expect(fileContent(serverPath)).To(HavePrefix("<"))
		_, err := os.Stat(serverPath)
		Expect(os.IsNotExist(err)).To(BeTrue())
	})
})
