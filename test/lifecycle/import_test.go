package lifecycle_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// handMadeStore creates, as an admin would with kubectl, what the rook-minio module manages: the
// namespace, the credentials Secret (named credsName) and the ObjectStore, labelled as the module
// labels them; and the Secret admin-key that holds the store's secret key for variablesFrom.
func handMadeStore(s *scenario, name, storeNS, credsName string) {
	labels := map[string]string{"app.kubernetes.io/name": "minio", "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "conductor-tf"}
	Expect(k8s.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: storeNS, Labels: labels}})).To(Succeed())
	Expect(k8s.Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: storeNS, Name: credsName, Labels: labels},
		Data: map[string][]byte{"username": []byte("minio"), "password": []byte("hand-made-secret-key-0123456789")}})).To(Succeed())
	Expect(k8s.Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: storeNS, Name: "admin-key"},
		Data: map[string][]byte{"password": []byte("hand-made-secret-key-0123456789")}})).To(Succeed())
	store := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "minio.rook.io/v1alpha1", "kind": "ObjectStore",
		"metadata": map[string]any{"name": name, "namespace": storeNS, "labels": map[string]any{
			"app.kubernetes.io/name": "minio", "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "conductor-tf"}},
		"spec": map[string]any{
			"scope": map[string]any{"nodeCount": int64(4), "volumeClaimTemplates": []any{map[string]any{
				"metadata": map[string]any{"name": name + "-data"},
				"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"},
					"resources": map[string]any{"requests": map[string]any{"storage": "2Gi"}}}}}},
			"credentials":   map[string]any{"name": "minio-" + name + "-access-keys", "namespace": storeNS},
			"clusterDomain": "cluster.local",
		},
	}}
	Expect(k8s.Create(s.ctx, store)).To(Succeed())
}

// minioResource is a static InfraResource over the published rook-minio module that adopts the
// hand-made store's credentials.
func minioResource(s *scenario, resName, name, storeNS, keySecret string, imports ...v1alpha1.ImportTarget) *v1alpha1.InfraResource {
	return &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: resName},
		Spec: v1alpha1.InfraResourceSpec{
			ResourceKind: s.kind,
			Module:       v1alpha1.ModuleSource{Source: modulesURL + "//modules/rook-minio", Version: harness.ModulesVersion},
			// The sample's account (config/samples/rook_minio_rbac.yaml): runs get no other credentials.
			RunInputs: v1alpha1.RunInputs{
				KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: "conductor-tf-module-rook-minio"},
				VariablesFrom: []v1alpha1.SecretInput{{Name: "secret_key", SecretKeyRef: v1alpha1.SecretKeySelector{
					Namespace: storeNS, Name: keySecret, Key: "password"}}},
			},
			Variables: v1alpha1.Variables{"name": js(fmt.Sprintf("%q", name)), "namespace": js(fmt.Sprintf("%q", storeNS)),
				"server": js(`"rook-objectstore"`), "node_count": js("4"), "storage_gib": js("2")},
			Capacity:      v1alpha1.Quantities{"storage": resource.MustParse("8Gi")},
			Capabilities:  map[string]string{"engine": "minio"},
			ReclaimPolicy: v1alpha1.ReclaimRetain,
			Import:        imports,
		},
	}
}

// synced returns the resource's Synced condition as "Reason: message", so that a failure shows why.
func synced(s *scenario, name string) func() string {
	return func() string {
		c := condition(s.resource(name)().Status.Conditions, v1alpha1.ConditionSynced)
		return c.Reason + ": " + c.Message
	}
}

func reason(r string) types.GomegaMatcher { return HavePrefix(r + ": ") }

var _ = Describe("Importing existing infrastructure", func() {
	It("imports objects made with kubectl, plans zero changes when the variables match, then binds to a claim", func() {
		s := newScenario()
		storeNS := "hand-" + s.ns
		handMadeStore(s, "legacy", storeNS, "minio-legacy-access-keys")
		res := minioResource(s, "imported-"+s.ns, "legacy", storeNS, "admin-key",
			v1alpha1.ImportTarget{Address: "kubernetes_namespace_v1.this", ID: storeNS},
			v1alpha1.ImportTarget{Address: "kubernetes_secret_v1.credentials", ID: storeNS + "/minio-legacy-access-keys"},
			v1alpha1.ImportTarget{Address: "kubernetes_manifest.object_store[0]",
				ID: "apiVersion=minio.rook.io/v1alpha1,kind=ObjectStore,namespace=" + storeNS + ",name=legacy"})
		Expect(k8s.Create(s.ctx, res)).To(Succeed())

		// The import run: its record is replaced by the next sync's, so it is caught while it shows.
		var got *v1alpha1.InfraResource
		Eventually(func(g Gomega) {
			got = s.resource(res.Name)()
			g.Expect(synced(s, res.Name)()).To(reason(v1alpha1.ReasonApplied))
			g.Expect(got.Status.LastRun).To(HaveField("Result", v1alpha1.RunSucceeded))
			g.Expect(got.Status.LastRun.Summary).NotTo(BeNil())
			g.Expect(got.Status.LastRun.Summary.Import).To(Equal(int32(3)))
		}, timeout, 100*time.Millisecond).Should(Succeed())
		Expect(got.Status.Imports).To(HaveLen(3))
		for _, imp := range got.Status.Imports {
			Expect(imp.Result).To(Equal("Imported"), "%s: %s", imp.Address, imp.Message)
		}
		// The kubernetes provider imports objects without the attributes that only configuration sets
		// (kubernetes_manifest's manifest, a Secret's wait_for_service_account_token): the import
		// run's plan updates them in state, in place. Nothing is created or destroyed.
		Expect(got.Status.LastRun.Summary).To(And(HaveField("Add", int32(0)), HaveField("Destroy", int32(0))), "%s", synced(s, res.Name)())
		Expect(got.Status.Phase).To(Equal(v1alpha1.ResourceAvailable))

		By("the next plan of the imported infrastructure (the periodic drift check) has zero changes")
		applies := countOps("apply", res.Name)
		Eventually(func() int { return countOps("plan", res.Name) }, timeout, time.Second).Should(BeNumerically(">=", 2))
		Eventually(func() *v1alpha1.RunStatus { return s.resource(res.Name)().Status.LastRun }, timeout, time.Second).Should(
			And(HaveField("Operation", "drift"), HaveField("Summary", Equal(&v1alpha1.PlanSummary{}))))
		Expect(s.resource(res.Name)().Status.Drift).To(HaveField("Drifted", false))
		Expect(countOps("apply", res.Name)).To(Equal(applies))
		creds := &corev1.Secret{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: storeNS, Name: "minio-legacy-access-keys"}, creds)).To(Succeed())
		Expect(string(creds.Data["password"])).To(Equal("hand-made-secret-key-0123456789"), "the hand-made credentials are kept")

		By("a claim binds to it statically and gets the adopted store's connection details")
		claim := &v1alpha1.InfraClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "legacy"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: s.kind, ResourceName: res.Name,
				Resources:                  v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("4Gi")}},
				WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: "legacy-s3"}},
		}
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		s.ready(claim)
		conn := &corev1.Secret{}
		Eventually(func() error { return k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "legacy-s3"}, conn) }, timeout).Should(Succeed())
		Expect(string(conn.Data["secret_key"])).To(Equal("hand-made-secret-key-0123456789"))
		Consistently(func() int { return countOps("apply", res.Name) }, 3*time.Second).Should(Equal(applies), "re-plans change nothing")
	})

	It("fails clearly on an id that does not exist, and applies nothing", func() {
		s := newScenario()
		storeNS := "none-" + s.ns
		res := minioResource(s, "noimport-"+s.ns, "none", storeNS, "",
			v1alpha1.ImportTarget{Address: "kubernetes_namespace_v1.this", ID: storeNS})
		res.Spec.VariablesFrom = nil
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		Eventually(synced(s, res.Name), timeout, time.Second).Should(reason(v1alpha1.ReasonImportFailed))
		got := s.resource(res.Name)()
		Expect(got.Status.Imports).To(ConsistOf(HaveField("Result", "Failed")))
		Expect(condition(got.Status.Conditions, v1alpha1.ConditionSynced).Message).To(ContainSubstring("non-existent"))
		Expect(countOps("apply", res.Name)).To(BeZero())
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: storeNS}, &corev1.Namespace{})).NotTo(Succeed(), "nothing was created")
	})

	It("waits for approval before replacing an imported object, and applies only after it", func() {
		s := newScenario()
		storeNS := "repl-" + s.ns
		handMadeStore(s, "old", storeNS, "legacy-creds") // credentials under a name the module would not use
		res := minioResource(s, "replace-"+s.ns, "old", storeNS, "admin-key",
			v1alpha1.ImportTarget{Address: "kubernetes_namespace_v1.this", ID: storeNS},
			v1alpha1.ImportTarget{Address: "kubernetes_secret_v1.credentials", ID: storeNS + "/legacy-creds"},
			v1alpha1.ImportTarget{Address: "kubernetes_manifest.object_store[0]",
				ID: "apiVersion=minio.rook.io/v1alpha1,kind=ObjectStore,namespace=" + storeNS + ",name=old"})
		Expect(k8s.Create(s.ctx, res)).To(Succeed())

		Eventually(synced(s, res.Name), timeout, time.Second).Should(reason(v1alpha1.ReasonReplaceNeedsApproval))
		got := s.resource(res.Name)()
		Expect(got.Status.PendingPlan).NotTo(BeNil())
		planID := got.Status.PendingPlan.ID
		Expect(planID).To(HaveLen(12))
		Expect(condition(got.Status.Conditions, v1alpha1.ConditionSynced).Message).To(
			And(ContainSubstring("module.main.kubernetes_secret_v1.credentials"), ContainSubstring(planID)))
		Consistently(func() int { return countOps("apply", res.Name) }, 5*time.Second).Should(BeZero())
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: storeNS, Name: "legacy-creds"}, &corev1.Secret{})).To(Succeed())

		By("approving the plan by its id applies it")
		Eventually(func() error {
			r := s.resource(res.Name)()
			r.Annotations = map[string]string{v1alpha1.AnnotationApproveReplace: planID}
			return k8s.Update(s.ctx, r)
		}, timeout).Should(Succeed())
		Eventually(synced(s, res.Name), timeout, time.Second).Should(reason(v1alpha1.ReasonApplied))
		Expect(countOps("apply", res.Name)).To(BeNumerically(">=", 1))
		Eventually(gone(func() error {
			return k8s.Get(s.ctx, client.ObjectKey{Namespace: storeNS, Name: "legacy-creds"}, &corev1.Secret{})
		}), timeout).Should(BeTrue())
		Expect(s.resource(res.Name)().Status.PendingPlan).To(BeNil())
		Expect(s.resource(res.Name)().Annotations).NotTo(HaveKey(v1alpha1.AnnotationApproveReplace), "an approval is consumed by its apply")
	})
})

var _ = Describe("Adopting orphaned state", func() {
	It("round-trips Retain → orphan → adopt with zero changes planned, and refuses state that is in use", func() {
		s := newScenario()
		Expect(k8s.Create(s.ctx, fileClass("adopt-"+s.ns, s.kind, v1alpha1.ReclaimRetain))).To(Succeed())
		claim := fileClaim(s.ns, "kept", s.kind, s.dir, "adopt me")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, old := s.ready(claim)
		orphan := statebackend.SecretName("default", statebackend.SuffixFor(old.Name))

		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(s.resource(old.Name), timeout).Should(HaveField("Status.Phase", v1alpha1.ResourceReleased))
		Expect(k8s.Delete(s.ctx, s.resource(old.Name)())).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: old.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Eventually(func() map[string]string {
			sec, err := stateSecret(s.ctx, old.Name)
			Expect(err).NotTo(HaveOccurred())
			return sec.Labels
		}, timeout).Should(HaveKeyWithValue(statebackend.LabelOrphanedFrom, old.Name))

		adopter := &v1alpha1.InfraResource{
			ObjectMeta: metav1.ObjectMeta{Name: "adopter-" + s.ns},
			Spec: v1alpha1.InfraResourceSpec{ResourceKind: s.kind, Module: old.Spec.Module, Variables: old.Spec.Variables,
				RunInputs: v1alpha1.RunInputs{KubernetesAccess: old.Spec.KubernetesAccess}, Capacity: old.Spec.Capacity, ReclaimPolicy: v1alpha1.ReclaimRetain, AdoptState: orphan},
		}
		Expect(k8s.Create(s.ctx, adopter)).To(Succeed())
		Eventually(func() *v1alpha1.RunStatus { return s.resource(adopter.Name)().Status.LastRun }, timeout, 100*time.Millisecond).Should(
			And(HaveField("Result", v1alpha1.RunSucceeded), HaveField("Operation", "plan"), HaveField("Summary", Equal(&v1alpha1.PlanSummary{}))),
			"the adopted state matches the infrastructure: the first plan changes nothing")
		got := s.resource(adopter.Name)()
		Expect(got.Status.State.AdoptedFrom).To(Equal(orphan))
		Expect(got.Status.LastRun.Summary).To(Equal(&v1alpha1.PlanSummary{}), "an apply -json that planned nothing changed nothing")
		sec, err := stateSecret(s.ctx, adopter.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(sec.Labels).To(HaveKeyWithValue(statebackend.LabelResource, adopter.Name))
		Expect(sec.Labels).NotTo(HaveKey(statebackend.LabelOrphanedFrom))
		_, err = stateSecret(s.ctx, old.Name)
		Expect(err).To(HaveOccurred(), "the orphan was moved, not copied")

		By("state another resource uses cannot be adopted")
		thief := adopter.DeepCopy()
		thief.ObjectMeta = metav1.ObjectMeta{Name: "thief-" + s.ns}
		thief.Spec.AdoptState = sec.Name
		Expect(k8s.Create(s.ctx, thief)).To(Succeed())
		Eventually(synced(s, thief.Name), timeout, time.Second).Should(reason(v1alpha1.ReasonAdoptionRefused))
		Expect(condition(s.resource(thief.Name)().Status.Conditions, v1alpha1.ConditionSynced).Message).To(ContainSubstring(adopter.Name))
		Expect(countOps("init", thief.Name)).To(BeZero())
	})
})
