package lifecycle_test

import (
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/discovery"
)

// configMapAccess is the ServiceAccount the discovery spec's runs get (kubernetesAccess): ConfigMaps
// of the cluster, and reading CRDs (kubernetes_resources looks a kind up there), nothing else. Made once; its name is returned.
func configMapAccess(s *scenario) string {
	const name = "conductor-tf-module-configmaps"
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}, {
			// kubernetes_resources looks the kind up among CRDs first.
			APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: stateNamespace, Name: name}}},
	} {
		if err := k8s.Create(s.ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
	return name
}

// discoveringClass is a class over testdata/modules/configmap that discovers, every 10s, the
// ConfigMaps of namespace ns labelled discover=<label>; its candidates' variables carry
// extraLabels (a module that would change what it found, when not empty).
func discoveringClass(s *scenario, name, ns, label, extraLabels string) *v1alpha1.InfraClass {
	cm, _ := filepath.Abs("testdata/modules/configmap")
	disc, _ := filepath.Abs("testdata/modules/discover-configmaps")
	return &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{
			ResourceKind: s.kind,
			Module:       v1alpha1.ModuleSource{Source: cm, Version: "v1.0.0"},
			Variables:    v1alpha1.Variables{"name": js(`"${claim.name}"`), "namespace": js(`"${claim.namespace}"`)},
			RunInputs:    v1alpha1.RunInputs{KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: configMapAccess(s)}},
			Discovery: &v1alpha1.ClassDiscovery{
				Module:    v1alpha1.ModuleSource{Source: disc, Version: "v1.0.0"},
				Variables: v1alpha1.Variables{"namespace": js(`"` + ns + `"`), "selector": js(`"discover=` + label + `"`), "extra_labels": js(extraLabels)},
				Interval:  &v1alpha1.Duration{Duration: 10 * time.Second},
			},
		},
	}
}

// madeOutside creates a ConfigMap as a person would with kubectl.
func madeOutside(s *scenario, ns, name string, labels map[string]string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Data: map[string]string{"owner": name + "-team"}}
	Expect(k8s.Create(s.ctx, cm)).To(Succeed())
	return cm
}

func discoveredOf(s *scenario, class string) func() map[string]v1alpha1.ResourcePhase {
	return func() map[string]v1alpha1.ResourcePhase {
		list := &v1alpha1.InfraResourceList{}
		Expect(k8s.List(s.ctx, list, client.MatchingLabels{v1alpha1.LabelDiscoveredBy: class})).To(Succeed())
		out := map[string]v1alpha1.ResourcePhase{}
		for _, r := range list.Items {
			out[r.Annotations[v1alpha1.AnnotationDiscoveryID]] = r.Status.Phase
		}
		return out
	}
}

// Issue 68, discovery: objects made outside the controller become resources waiting for claims,
// never applied until a claim binds one, whose first plan must then only import.
var _ = Describe("Discovery: infrastructure that appears becomes resources", func() {
	It("lists labelled ConfigMaps made outside into Available resources; a claim binds one with a 0/0/0 import plan; one that goes is Lost, a bound one stays", func() {
		s := newScenario()
		found := "found-" + s.ns
		Expect(k8s.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: found}})).To(Succeed())
		for _, n := range []string{"alpha", "beta", "gamma"} {
			madeOutside(s, found, n, map[string]string{"discover": "me"})
		}
		madeOutside(s, found, "unlabelled", nil)
		class := discoveringClass(s, "cm-"+s.ns, found, "me", `{}`)
		Expect(k8s.Create(s.ctx, class)).To(Succeed())

		By("each labelled ConfigMap becomes an Available resource of the class, with its import identity; the unlabelled one does not")
		Eventually(discoveredOf(s, class.Name), timeout, time.Second).Should(Equal(map[string]v1alpha1.ResourcePhase{
			found + "/alpha": v1alpha1.ResourceAvailable, found + "/beta": v1alpha1.ResourceAvailable, found + "/gamma": v1alpha1.ResourceAvailable}))
		alpha := s.resource(discovery.ResourceName(class.Name, found+"/alpha"))()
		Expect(alpha.Spec.Import).To(Equal([]v1alpha1.ImportTarget{{Address: "kubernetes_config_map_v1.this", ID: found + "/alpha"}}))
		Expect(alpha.Spec.ReclaimPolicy).To(Equal(v1alpha1.ReclaimRetain), "nobody created it here")
		Expect(string(alpha.Spec.Variables["data"].Raw)).To(MatchJSON(`{"owner":"alpha-team"}`))
		Expect(condition(alpha.Status.Conditions, v1alpha1.ConditionSynced).Reason).To(Equal(v1alpha1.ReasonDiscovered))
		Eventually(func() *v1alpha1.DiscoveryStatus {
			c := &v1alpha1.InfraClass{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(class), c)).To(Succeed())
			return c.Status.Discovery
		}, timeout, time.Second).Should(And(Not(BeNil()), HaveField("Candidates", int32(3)), HaveField("Available", int32(3))))
		Consistently(func() int {
			return runs(alpha.Name) + countOps("import", alpha.Name)
		}, 3*time.Second, time.Second).Should(BeZero(), "a discovered resource is never planned or applied until a claim binds it")
		GinkgoWriter.Printf("transcript: class %s listed %d ConfigMaps made outside into resources: %v\n", class.Name, 3, discoveredOf(s, class.Name)())

		By("a claim that names the alpha resource binds it: the first run imports, plans 0 to add, 0 to change, 0 to destroy, and the claim is Ready")
		before := &corev1.ConfigMap{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: found, Name: "alpha"}, before)).To(Succeed())
		claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "alpha"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: s.kind, ResourceName: alpha.Name}}
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		Expect(res.Status.Imports).To(ConsistOf(HaveField("Result", "Imported")))
		Expect(res.Status.ModuleVersion).NotTo(BeEmpty())
		last := res.Status.LastRun
		Expect(last.Result).To(Equal(v1alpha1.RunSucceeded))
		if last.Summary != nil {
			Expect(*last.Summary).To(And(HaveField("Add", int32(0)), HaveField("Change", int32(0)), HaveField("Destroy", int32(0))), "the import-only plan")
		}
		Expect(countOps("import", alpha.Name)).To(Equal(1))
		after := &corev1.ConfigMap{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: found, Name: "alpha"}, after)).To(Succeed())
		Expect(after.UID).To(Equal(before.UID), "the same object, adopted")
		Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "and not changed")
		GinkgoWriter.Printf("transcript: claim %s/%s bound %s; import %+v; last run %s %s summary %+v\n", s.ns, claim.Name, res.Name,
			res.Status.Imports, last.Operation, last.Result, last.Summary)

		By("beta is deleted outside: its unbound resource is Lost (not deleted); alpha, bound, is never touched by discovery")
		Expect(k8s.Delete(s.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: found, Name: "beta"}})).To(Succeed())
		Eventually(discoveredOf(s, class.Name), timeout, time.Second).Should(Equal(map[string]v1alpha1.ResourcePhase{
			found + "/alpha": v1alpha1.ResourceBound, found + "/beta": v1alpha1.ResourceLost, found + "/gamma": v1alpha1.ResourceAvailable}))
		lost := s.resource(discovery.ResourceName(class.Name, found+"/beta"))()
		Expect(condition(lost.Status.Conditions, v1alpha1.ConditionSynced).Reason).To(Equal(v1alpha1.ReasonCandidateLost))
		named := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "beta"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: s.kind, ResourceName: lost.Name}}
		Expect(k8s.Create(s.ctx, named)).To(Succeed())
		Eventually(func() string { return condition(s.claim(named)().Status.Conditions, v1alpha1.ConditionBound).Message }, timeout, time.Second).
			Should(ContainSubstring("is Lost"))

		By("alpha loses its label (no longer listed): its resource, bound, stays Bound and is not deleted")
		Eventually(func() error {
			cm := &corev1.ConfigMap{}
			if err := k8s.Get(s.ctx, client.ObjectKey{Namespace: found, Name: "alpha"}, cm); err != nil {
				return err
			}
			delete(cm.Labels, "discover")
			return k8s.Update(s.ctx, cm)
		}, timeout).Should(Succeed())
		Consistently(func() v1alpha1.ResourcePhase { return s.resource(alpha.Name)().Status.Phase }, 25*time.Second, time.Second).
			Should(Equal(v1alpha1.ResourceBound))

		By("beta made again: its resource is Available again")
		madeOutside(s, found, "beta", map[string]string{"discover": "me"})
		Eventually(func() v1alpha1.ResourcePhase { return s.resource(lost.Name)().Status.Phase }, timeout, time.Second).Should(Equal(v1alpha1.ResourceAvailable))
	})

	It("a discovered object the class's module would change: the binding's plan waits, shown, and nothing is changed", func() {
		s := newScenario()
		found := "found-" + s.ns
		Expect(k8s.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: found}})).To(Succeed())
		madeOutside(s, found, "delta", map[string]string{"discover": "relabel"})
		class := discoveringClass(s, "cm-relabel-"+s.ns, found, "relabel", `{"managed":"conductor-tf"}`)
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		name := discovery.ResourceName(class.Name, found+"/delta")
		Eventually(discoveredOf(s, class.Name), timeout, time.Second).Should(HaveKeyWithValue(found+"/delta", v1alpha1.ResourceAvailable))
		claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "delta"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: s.kind, ResourceName: name}}
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		Eventually(func() *v1alpha1.PendingPlan { return s.resource(name)().Status.PendingPlan }, timeout, time.Second).Should(Not(BeNil()))
		pp := s.resource(name)().Status.PendingPlan
		Expect(pp.Reason).To(Equal(v1alpha1.HoldPolicyApproval))
		Expect(pp.Rule).To(Equal("discovered-import-only"))
		Expect(pp.Summary).To(And(HaveField("Add", int32(0)), HaveField("Change", int32(1)), HaveField("Destroy", int32(0))))
		Expect(strings.Join(pp.Changes, "; ")).To(ContainSubstring("kubernetes_config_map_v1.this"))
		Expect(pp.Secret).NotTo(BeEmpty(), "the plan is shown")
		cm := &corev1.ConfigMap{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: found, Name: "delta"}, cm)).To(Succeed())
		Expect(cm.Labels).NotTo(HaveKey("managed"), "nothing applied")
		Expect(s.claim(claim)().Status.Phase).To(Equal(v1alpha1.ClaimBound))
		Expect(readyStatus(s.claim(claim)())).NotTo(Equal(metav1.ConditionTrue))
		GinkgoWriter.Printf("transcript: held %s: %s %s (%s) %+v %v\n", name, pp.Reason, pp.Rule, pp.Message, pp.Summary, pp.Changes)
	})
})

// The failure model: a listing that fails is not an empty one. A class whose runs may not list
// says DiscoveryFailed with the provider's error and makes nothing; once allowed, it lists; when
// the access goes again, the failing listings mark nothing Lost.
var _ = Describe("Discovery when the listing fails", func() {
	It("says DiscoveryFailed with the error, and a later failing listing leaves the discovered resources as they are", func() {
		s := newScenario()
		found := "found-" + s.ns
		Expect(k8s.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: found}})).To(Succeed())
		madeOutside(s, found, "one", map[string]string{"discover": "fail"})
		madeOutside(s, found, "two", map[string]string{"discover": "fail"})
		// An account of its own, with no rights yet.
		sa := "discovery-" + s.ns
		Expect(k8s.Create(s.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: sa}})).To(Succeed())
		class := discoveringClass(s, "cm-fail-"+s.ns, found, "fail", `{}`)
		class.Spec.KubernetesAccess.ServiceAccountName = sa
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		discovered := func() metav1.Condition {
			c := &v1alpha1.InfraClass{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(class), c)).To(Succeed())
			return condition(c.Status.Conditions, v1alpha1.ConditionDiscovered)
		}
		Eventually(func() string { c := discovered(); return c.Reason + ": " + c.Message }, timeout, time.Second).Should(
			And(HavePrefix(v1alpha1.ReasonDiscoveryFailed+": "), ContainSubstring("forbidden")))
		Expect(discoveredOf(s, class.Name)()).To(BeEmpty())

		By("allowed to list: the two ConfigMaps become resources")
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: configMapAccess(s)},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: stateNamespace, Name: sa}}}
		Expect(k8s.Create(s.ctx, binding)).To(Succeed())
		Eventually(discoveredOf(s, class.Name), timeout, time.Second).Should(Equal(map[string]v1alpha1.ResourcePhase{
			found + "/one": v1alpha1.ResourceAvailable, found + "/two": v1alpha1.ResourceAvailable}))
		Expect(discovered().Status).To(Equal(metav1.ConditionTrue))

		By("the access revoked and one ConfigMap deleted: the listings fail, and nothing is marked Lost")
		Expect(k8s.Delete(s.ctx, binding)).To(Succeed())
		Expect(k8s.Delete(s.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: found, Name: "two"}})).To(Succeed())
		listing := discovery.ListingName(class.Name)
		plans := countOps("plan", listing)
		Consistently(discoveredOf(s, class.Name), 30*time.Second, time.Second).Should(Equal(map[string]v1alpha1.ResourcePhase{
			found + "/one": v1alpha1.ResourceAvailable, found + "/two": v1alpha1.ResourceAvailable}), "a failed listing is not an empty one")
		// The window held listings (the drift checks of an interval of 10s), refused by the API:
		// had none run, nothing could have been marked Lost either way.
		Expect(countOps("plan", listing)).To(BeNumerically(">", plans), "listings ran while the access was revoked")
	})
})
