package lifecycle_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 67: claims that read other claims' outputs, on real tofu and the file module. A chain of
// three: network (a file), db (a file whose content is what it reads from network), app (reads
// both, and network's sensitive password as the module's secret_word).

// readerClass is a class over the file module whose content is the JSON of the values the claim
// reads (inputs), and whose secret_word the claim's inputs may set (the class leaves it unset).
func readerClass(name, kind string) *v1alpha1.InfraClass {
	return fileClass(name, kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
		c.Spec.Variables["content"] = js(`"${jsonencode(inputs)}"`)
	})
}

func readsFrom(c *v1alpha1.InfraClaim, pairs ...string) *v1alpha1.InfraClaim {
	for i := 0; i+2 < len(pairs); i += 3 {
		c.Spec.ParametersFrom = append(c.Spec.ParametersFrom, v1alpha1.ParameterFrom{Parameter: pairs[i], Claim: pairs[i+1], Output: pairs[i+2]})
	}
	return c
}

func inputsCondition(c *v1alpha1.InfraClaim) metav1.Condition {
	return condition(c.Status.Conditions, v1alpha1.ConditionInputsReady)
}

var _ = Describe("A graph of claims on real tofu", func() {
	It("provisions a chain in order, propagates an upstream change, starts nothing on a no-op sync, refuses a cycle and deletes in reverse", func() {
		s := newScenario()
		readerKind := s.kind + "Reader"
		Expect(k8s.Create(s.ctx, fileClass("net-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		Expect(k8s.Create(s.ctx, readerClass("reader-"+s.ns, readerKind))).To(Succeed())

		By("three claims created at once: db and app wait for what they read")
		network := fileClaim(s.ns, "network", s.kind, s.dir, "net-v1")
		db := readsFrom(fileClaim(s.ns, "db", readerKind, s.dir, ""), "net", "network", "content_sha256")
		app := readsFrom(fileClaim(s.ns, "app", readerKind, s.dir, ""),
			"net", "network", "content_sha256", "db", "db", "path", "secret_word", "network", "password")
		for _, c := range []*v1alpha1.InfraClaim{app, db, network} {
			Expect(k8s.Create(s.ctx, c)).To(Succeed())
		}
		Eventually(s.claim(app), timeout, 200*time.Millisecond).Should(WithTransform(inputsCondition, HaveField("Reason", v1alpha1.ReasonWaitingForUpstream)))

		network, netRes := s.ready(network)
		db, dbRes := s.ready(db)
		app, appRes := s.ready(app)
		netReady := condition(network.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime
		Expect(dbRes.CreationTimestamp.Time).NotTo(BeTemporally("<", netReady.Time), "db is provisioned only once network is Ready")
		dbReady := condition(db.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime
		Expect(appRes.CreationTimestamp.Time).NotTo(BeTemporally("<", dbReady.Time), "app is provisioned only once db is Ready")

		By("each file holds what it reads; the sensitive password reaches app's file and no object")
		sha := func(res *v1alpha1.InfraResource) string {
			var v string
			Expect(json.Unmarshal(res.Status.Outputs["content_sha256"].Raw, &v)).To(Succeed())
			return v
		}
		netConn := &corev1.Secret{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "network-conn"}, netConn)).To(Succeed())
		password := string(netConn.Data["password"])
		dbPath := filepath.Join(s.dir, s.ns+"-db.txt")
		appPath := filepath.Join(s.dir, s.ns+"-app.txt")
		Expect(fileContent(dbPath)).To(Equal(`{"net":"` + sha(netRes) + `"}`))
		Expect(fileContent(appPath)).To(Equal(`{"db":"` + dbPath + `","net":"` + sha(netRes) + `"}` + "\n" + password))
		for _, obj := range []any{app, appRes, db, dbRes} {
			raw, _ := json.Marshal(obj)
			Expect(string(raw)).NotTo(ContainSubstring(password))
		}
		Expect(app.Status.Inputs.Reads).To(ContainElement(And(HaveField("Parameter", "secret_word"), HaveField("Sensitive", true), HaveField("Value", BeNil()))))
		Eventually(s.claim(network), timeout).Should(WithTransform(func(c *v1alpha1.InfraClaim) int {
			if c.Status.Inputs == nil {
				return 0
			}
			return len(c.Status.Inputs.ReadBy)
		}, Equal(2)))

		By("a sync of network that changes nothing starts no run of db or app")
		dbApplies, appApplies := countOps("apply", dbRes.Name), countOps("apply", appRes.Name)
		dbGen, appGen := dbRes.Generation, appRes.Generation
		stamp := time.Now().Format(time.RFC3339Nano)
		Eventually(func() error {
			r := s.resource(netRes.Name)()
			r.Annotations[v1alpha1.AnnotationReconcileRequestedAt] = stamp
			return k8s.Update(s.ctx, r)
		}, timeout).Should(Succeed())
		Eventually(func() string { return s.resource(netRes.Name)().Status.LastHandledReconcileAt }, timeout).Should(Equal(stamp))
		Eventually(func() *v1alpha1.RunStatus { return s.resource(netRes.Name)().Status.LastRun }, timeout).Should(HaveField("CompletionTime", Not(BeNil())))
		Consistently(func() []int64 {
			return []int64{s.resource(dbRes.Name)().Generation, s.resource(appRes.Name)().Generation,
				int64(countOps("apply", dbRes.Name)), int64(countOps("apply", appRes.Name))}
		}, 5*time.Second).Should(Equal([]int64{dbGen, appGen, int64(dbApplies), int64(appApplies)}))

		By("network's content changes: db and app are rendered and applied again with the new value")
		Eventually(func() error {
			c := s.claim(network)()
			c.Spec.Parameters["greeting"] = js(`"net-v2"`)
			return k8s.Update(s.ctx, c)
		}, timeout).Should(Succeed())
		Eventually(func() string { return fileContent(filepath.Join(s.dir, s.ns+"-network.txt")) }, timeout, time.Second).Should(Equal("hello net-v2"))
		Eventually(func() string { return sha(s.resource(netRes.Name)()) }, timeout, time.Second).ShouldNot(Equal(sha(netRes)))
		newSha := sha(s.resource(netRes.Name)())
		Eventually(func() string { return fileContent(dbPath) }, timeout, time.Second).Should(Equal(`{"net":"` + newSha + `"}`))
		Eventually(func() string { return fileContent(appPath) }, timeout, time.Second).Should(HavePrefix(`{"db":"` + dbPath + `","net":"` + newSha + `"}`))
		Expect(s.resource(dbRes.Name)().Generation).To(Equal(dbGen + 1))

		By("a cycle is refused by name; nothing of it is provisioned")
		x := readsFrom(fileClaim(s.ns, "x", readerKind, s.dir, ""), "y", "y", "path")
		y := readsFrom(fileClaim(s.ns, "y", readerKind, s.dir, ""), "x", "x", "path")
		Expect(k8s.Create(s.ctx, x)).To(Succeed())
		Expect(k8s.Create(s.ctx, y)).To(Succeed())
		for _, c := range []*v1alpha1.InfraClaim{x, y} {
			Eventually(s.claim(c), timeout).Should(WithTransform(inputsCondition, HaveField("Reason", v1alpha1.ReasonDependencyCycle)))
			Expect(s.claim(c)().Status.Phase).To(Equal(v1alpha1.ClaimPending))
		}
		Expect(inputsCondition(s.claim(x)()).Message).To(ContainSubstring(s.ns + "/x → " + s.ns + "/y → " + s.ns + "/x"))
		Expect(k8s.Delete(s.ctx, x)).To(Succeed())
		Expect(k8s.Delete(s.ctx, y)).To(Succeed())

		By("network is deleted first: it waits for db and app, whose files stay")
		netPath := filepath.Join(s.dir, s.ns+"-network.txt")
		Expect(k8s.Delete(s.ctx, network)).To(Succeed())
		Eventually(func() string {
			return condition(s.claim(network)().Status.Conditions, v1alpha1.ConditionInUse).Message
		}, timeout).Should(And(ContainSubstring("claim "+s.ns+"/app"), ContainSubstring("claim "+s.ns+"/db")))
		Consistently(func() string { return fileContent(netPath) }, 3*time.Second).Should(Equal("hello net-v2"))
		Eventually(s.claim(db), timeout).Should(WithTransform(inputsCondition, HaveField("Reason", v1alpha1.ReasonUpstreamNotFound)))
		Expect(fileContent(dbPath)).To(Equal(`{"net":"`+newSha+`"}`), "a reader whose upstream goes keeps its infrastructure")

		By("the namespace is deleted with the whole graph: readers are destroyed before what they read, " +
			"app's destroy reading network's password from its connection Secret, which stays until then")
		Expect(k8s.Delete(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}})).To(Succeed())
		Eventually(func() bool { _, err := os.Stat(netPath); return os.IsNotExist(err) }, timeout, 200*time.Millisecond).Should(BeTrue())
		// When network's file went, app's and db's were gone already.
		Expect(fileContent(appPath)).To(HavePrefix("<"))
		Expect(fileContent(dbPath)).To(HavePrefix("<"))
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: netRes.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: s.ns}, &corev1.Namespace{}) }), timeout).Should(BeTrue())
	})
})
