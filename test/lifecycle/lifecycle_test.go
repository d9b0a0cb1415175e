package lifecycle_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

const timeout = 3 * time.Minute

func js(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

// fileClass is a class over the file module: the claim's parameters choose the directory and the
// greeting; the file is named after the claim.
func fileClass(name, kind string, policy v1alpha1.ReclaimPolicy, mutate ...func(*v1alpha1.InfraClass)) *v1alpha1.InfraClass {
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{
			ResourceKind: kind,
			Default:      true,
			Module:       v1alpha1.ModuleSource{Source: moduleDir, Version: "v1.0.0"},
			Variables: v1alpha1.Variables{
				"path":    js(`"${claim.spec.parameters.dir}/${claim.namespace}-${claim.name}.txt"`),
				"content": js(`"hello ${claim.spec.parameters.greeting}"`),
			},
			ReclaimPolicy: policy,
			// Every change of the file module replaces the file: these specs are about other
			// things than the destructive-change guard (see ops_test.go for the guard).
			Operations: v1alpha1.Operations{AllowDestructiveChanges: true},
		},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}

func fileClaim(ns, name, kind, dir, greeting string) *v1alpha1.InfraClaim {
	return &v1alpha1.InfraClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.InfraClaimSpec{
			ResourceKind:               kind,
			Resources:                  v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}},
			Parameters:                 v1alpha1.Variables{"dir": js(fmt.Sprintf("%q", dir)), "greeting": js(fmt.Sprintf("%q", greeting))},
			WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: name + "-conn"},
		},
	}
}

type scenario struct {
	ctx  context.Context
	ns   string
	kind string
	dir  string
}

func newScenario() *scenario {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "app-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	// Under the suite's files directory, which runner processes let their runs write
	// (--run-sandbox-write).
	dir, err := os.MkdirTemp(filesDir(), "conductor-files-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	return &scenario{ctx: ctx, ns: ns.Name, kind: "File" + rand.String(6), dir: dir}
}

func (s *scenario) claim(c *v1alpha1.InfraClaim) func() *v1alpha1.InfraClaim {
	return func() *v1alpha1.InfraClaim {
		out := &v1alpha1.InfraClaim{}
		Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(c), out)).To(Succeed())
		return out
	}
}

func (s *scenario) resource(name string) func() *v1alpha1.InfraResource {
	return func() *v1alpha1.InfraResource {
		out := &v1alpha1.InfraResource{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: name}, out)).To(Succeed())
		return out
	}
}

func condition(conds []metav1.Condition, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func readyStatus(c *v1alpha1.InfraClaim) metav1.ConditionStatus {
	return condition(c.Status.Conditions, v1alpha1.ConditionReady).Status
}

// ready waits until the claim is Bound and Ready and returns it with its resource.
func (s *scenario) ready(c *v1alpha1.InfraClaim) (*v1alpha1.InfraClaim, *v1alpha1.InfraResource) {
	Eventually(s.claim(c), timeout, time.Second).Should(WithTransform(readyStatus, Equal(metav1.ConditionTrue)))
	got := s.claim(c)()
	Expect(got.Status.Phase).To(Equal(v1alpha1.ClaimBound))
	return got, s.resource(got.Spec.ResourceName)()
}

func fileContent(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func stateSecret(ctx context.Context, res string) (*corev1.Secret, error) {
	return kube.CoreV1().Secrets(stateNamespace).Get(ctx, statebackend.SecretName("default", statebackend.SuffixFor(res)), metav1.GetOptions{})
}

func gone(get func() error) func() bool { return func() bool { return apierrors.IsNotFound(get()) } }

var _ = Describe("A claim through the file module", func() {
	It("provisions the file, state and connection Secret, re-applies a changed parameter, and Delete reclaims it all", func() {
		s := newScenario()
		Expect(k8s.Create(s.ctx, fileClass("file-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		claim := fileClaim(s.ns, "notes", s.kind, s.dir, "world")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		claim, res := s.ready(claim)
		path := filepath.Join(s.dir, s.ns+"-notes.txt")

		By("the file exists with the rendered content")
		Expect(fileContent(path)).To(Equal("hello world"))

		By("the state Secret exists, labelled with its resource, and status shows its serial")
		secret, err := stateSecret(s.ctx, res.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(secret.Labels).To(HaveKeyWithValue(statebackend.LabelResource, res.Name))
		Expect(res.Status.State.SecretName).To(Equal(secret.Name))
		Expect(res.Status.State.Serial).To(BeNumerically(">", 0))
		Expect(res.Status.LastRun.Operation).To(Equal("apply"), "generation %d, lastRun %+v, annotations %v", res.Generation, *res.Status.LastRun, res.Annotations)
		Expect(res.Status.LastRun.Summary).To(Equal(&v1alpha1.PlanSummary{Add: 2}))

		By("the connection Secret has every output; the sensitive password is only there")
		conn := &corev1.Secret{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "notes-conn"}, conn)).To(Succeed())
		Expect(string(conn.Data["path"])).To(Equal(path))
		Expect(conn.Data["password"]).To(HaveLen(20))
		Expect(conn.OwnerReferences).To(ContainElement(HaveField("UID", claim.UID)))
		Expect(res.Status.Outputs).To(HaveKey("path"))
		Expect(res.Status.Outputs).NotTo(HaveKey("password"))
		raw, _ := json.Marshal(res)
		Expect(string(raw)).NotTo(ContainSubstring(string(conn.Data["password"])))

		By("changing a parameter the template uses re-applies and changes the file")
		Eventually(func() error {
			c := s.claim(claim)()
			c.Spec.Parameters["greeting"] = js(`"again"`)
			return k8s.Update(s.ctx, c)
		}, timeout).Should(Succeed())
		Eventually(func() string { return fileContent(path) }, timeout, time.Second).Should(Equal("hello again"))
		// The run's final status write carries its result, even though a Running record was
		// written mid-run (no extra plan is needed to settle it).
		Eventually(func() *v1alpha1.RunStatus { return s.resource(res.Name)().Status.LastRun }, timeout).Should(
			And(HaveField("Operation", "apply"), HaveField("Result", v1alpha1.RunSucceeded)))
		Consistently(func() v1alpha1.RunResult { return s.resource(res.Name)().Status.LastRun.Result }, 2*time.Second).Should(Equal(v1alpha1.RunSucceeded))

		By("deleting the claim destroys the file, then the state Secret, then the resource")
		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(func() bool { _, err := os.Stat(path); return os.IsNotExist(err) }, timeout, time.Second).Should(BeTrue())
		Eventually(gone(func() error { _, err := stateSecret(s.ctx, res.Name); return err }), timeout).Should(BeTrue())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
	})

	It("keeps infrastructure and state with Retain, and orphans the state when the resource is deleted", func() {
		s := newScenario()
		Expect(k8s.Create(s.ctx, fileClass("keep-"+s.ns, s.kind, v1alpha1.ReclaimRetain))).To(Succeed())
		claim := fileClaim(s.ns, "keep", s.kind, s.dir, "kept")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		path := filepath.Join(s.dir, s.ns+"-keep.txt")
		Expect(fileContent(path)).To(Equal("hello kept"))

		Expect(k8s.Delete(s.ctx, claim)).To(Succeed())
		Eventually(s.resource(res.Name), timeout).Should(HaveField("Status.Phase", v1alpha1.ResourceReleased))
		Consistently(func() string { return fileContent(path) }, 5*time.Second).Should(Equal("hello kept"))
		_, err := stateSecret(s.ctx, res.Name)
		Expect(err).NotTo(HaveOccurred())

		Expect(k8s.Delete(s.ctx, s.resource(res.Name)())).To(Succeed())
		Eventually(gone(func() error { return k8s.Get(s.ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}) }), timeout).Should(BeTrue())
		Expect(fileContent(path)).To(Equal("hello kept"))
		secret, err := stateSecret(s.ctx, res.Name)
		Expect(err).NotTo(HaveOccurred())
		Expect(secret.Labels).To(HaveKeyWithValue(statebackend.LabelOrphanedFrom, res.Name))
		Expect(secret.Labels).NotTo(HaveKey(statebackend.LabelResource))

		By("a new resource of the same name does not silently take over the orphaned state")
		plans := runs(res.Name)
		again := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: res.Name}, Spec: res.Spec}
		again.Spec.ClaimRef = nil
		Expect(k8s.Create(s.ctx, again)).To(Succeed())
		Eventually(func() string {
			return condition(s.resource(res.Name)().Status.Conditions, v1alpha1.ConditionSynced).Reason
		}, timeout).
			Should(Equal(v1alpha1.ReasonAdoptionRefused))
		Expect(runs(res.Name)).To(Equal(plans), "the new resource ran nothing")
		Expect(fileContent(path)).To(Equal("hello kept"))
	})
})

var _ = Describe("Bad input gets a clear condition and no run", func() {
	// expectRefused waits for the resource's Synced condition to carry reason, then checks that no
	// plan or apply ever ran in its workspace.
	// A claim already created (it has a resourceVersion) is not created again.
	expectRefused := func(s *scenario, claim *v1alpha1.InfraClaim, reason string, mutateRes func(*v1alpha1.InfraResource)) *v1alpha1.InfraResource {
		if claim.ResourceVersion == "" {
			Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		}
		Eventually(func() string { return s.claim(claim)().Spec.ResourceName }, timeout).ShouldNot(BeEmpty())
		name := s.claim(claim)().Spec.ResourceName
		if mutateRes != nil {
			Eventually(func() error { r := s.resource(name)(); mutateRes(r); return k8s.Update(s.ctx, r) }, timeout).Should(Succeed())
		}
		Eventually(func() string { return condition(s.resource(name)().Status.Conditions, v1alpha1.ConditionSynced).Reason }, timeout, time.Second).
			Should(Equal(reason))
		res := s.resource(name)()
		Expect(condition(res.Status.Conditions, v1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		Expect(condition(res.Status.Conditions, v1alpha1.ConditionSynced).Message).NotTo(BeEmpty())
		Consistently(func() int { return countOps("plan", name) + countOps("apply", name) }, 3*time.Second).Should(BeZero())
		return res
	}

	It("a template variable the module does not declare: class and resource say InvalidVariables/TemplateInvalid", func() {
		s := newScenario()
		class := fileClass("unknown-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Variables["colour"] = js(`"red"`)
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		Eventually(func() string {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			return condition(got.Status.Conditions, v1alpha1.ConditionReady).Reason
		}, timeout).Should(Equal(v1alpha1.ReasonTemplateInvalid))
		// A static resource with the same mistake is refused before any plan.
		claim := fileClaim(s.ns, "unknown", s.kind, s.dir, "x")
		res := &v1alpha1.InfraResource{
			ObjectMeta: metav1.ObjectMeta{Name: "unknown-" + s.ns},
			Spec: v1alpha1.InfraResourceSpec{ResourceKind: s.kind, Module: v1alpha1.ModuleSource{Source: moduleDir, Version: "v1"},
				Variables: v1alpha1.Variables{"path": js(fmt.Sprintf("%q", filepath.Join(s.dir, "u"))), "content": js(`"x"`), "colour": js(`"red"`)},
				Capacity:  v1alpha1.Quantities{"storage": resource.MustParse("1Gi")},
				ClaimRef:  &v1alpha1.ClaimReference{Namespace: s.ns, Name: "unknown"}},
		}
		Expect(k8s.Create(s.ctx, res)).To(Succeed())
		got := expectRefused(s, claim, v1alpha1.ReasonInvalidVariables, nil)
		Expect(condition(got.Status.Conditions, v1alpha1.ConditionSynced).Message).To(ContainSubstring(`"colour"`))
	})

	It("a module that cannot be fetched: the class says ModuleInvalid and no claim provisions from it", func() {
		s := newScenario()
		class := fileClass("nomodule-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Module = v1alpha1.ModuleSource{Source: "git::file:///nonexistent/modules.git//file", Version: "v9.9.9"}
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		Eventually(func() metav1.Condition {
			got := &v1alpha1.InfraClass{}
			Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(class), got)).To(Succeed())
			return condition(got.Status.Conditions, v1alpha1.ConditionReady)
		}, timeout).Should(And(HaveField("Reason", v1alpha1.ReasonModuleInvalid), HaveField("Message", ContainSubstring("nonexistent"))))
		claim := fileClaim(s.ns, "nomodule", s.kind, s.dir, "x")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		Eventually(func() string { return condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionBound).Reason }, timeout).
			Should(Equal(v1alpha1.ReasonProvisioningFailed))
		Expect(s.claim(claim)().Spec.ResourceName).To(BeEmpty())
	})

	It("a connection Secret name already used by another Secret: the Secret is left alone", func() {
		s := newScenario()
		Expect(k8s.Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "taken-conn"},
			Data: map[string][]byte{"tls.crt": []byte("mine")}})).To(Succeed())
		Expect(k8s.Create(s.ctx, fileClass("taken-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		claim := fileClaim(s.ns, "taken", s.kind, s.dir, "x")
		claim.Spec.WriteConnectionSecretToRef.Name = "taken-conn"
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		Eventually(func() string { return s.claim(claim)().Spec.ResourceName }, timeout).ShouldNot(BeEmpty())
		name := s.claim(claim)().Spec.ResourceName
		Eventually(func() string {
			return condition(s.resource(name)().Status.Conditions, v1alpha1.ConditionSynced).Message
		}, timeout, time.Second).
			Should(ContainSubstring("is not the connection Secret"))
		other := &corev1.Secret{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "taken-conn"}, other)).To(Succeed())
		Expect(other.Data).To(Equal(map[string][]byte{"tls.crt": []byte("mine")}))
		Expect(other.OwnerReferences).To(BeEmpty())
	})

	It("a connection Secret deleted by hand is written again from the state, and the claim is not Ready while another object holds its name", func() {
		s := newScenario()
		Expect(k8s.Create(s.ctx, fileClass("conn-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		claim := fileClaim(s.ns, "conn", s.kind, s.dir, "kept")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		key := client.ObjectKey{Namespace: s.ns, Name: claim.Spec.WriteConnectionSecretToRef.Name}
		written := &corev1.Secret{}
		Expect(k8s.Get(s.ctx, key, written)).To(Succeed())

		By("deleted: back within the check interval, with the same outputs")
		Expect(k8s.Delete(s.ctx, written)).To(Succeed())
		Eventually(func() map[string][]byte {
			back := &corev1.Secret{}
			if err := k8s.Get(s.ctx, key, back); err != nil {
				return nil
			}
			return back.Data
		}, 30*time.Second, 500*time.Millisecond).Should(Equal(written.Data))
		Expect(eventReasons(s, res.Name)).To(ContainElement(HavePrefix("ConnectionSecretWritten")))

		By("another object takes the name: the claim says so instead of Ready")
		Expect(k8s.Delete(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: key.Name}})).To(Succeed())
		Expect(k8s.Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: key.Name},
			Data: map[string][]byte{"other": []byte("x")}})).To(Succeed())
		Eventually(func() string { return condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionReady).Reason }, 30*time.Second, 500*time.Millisecond).
			Should(Equal(v1alpha1.ReasonConnectionSecretMissing))

		By("it goes: the connection Secret is back and the claim Ready")
		Expect(k8s.Delete(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: key.Name}})).To(Succeed())
		Eventually(s.claim(claim), 30*time.Second, 500*time.Millisecond).Should(WithTransform(readyStatus, Equal(metav1.ConditionTrue)))
		Expect(k8s.Get(s.ctx, key, &corev1.Secret{})).To(Succeed())
	})

	It("a value of the wrong type: InvalidVariables (a claim made before its class, which admission could not check)", func() {
		s := newScenario()
		// Once the class is Ready, the API server refuses such a claim (its admission policy, see
		// policy_test.go); made before the class, it is checked when it renders.
		claim := fileClaim(s.ns, "typed", s.kind, s.dir, "not-a-number")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		Expect(k8s.Create(s.ctx, fileClass("type-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Variables["mode"] = js(`"${claim.spec.parameters.greeting}"`) // a word, not a number
		}))).To(Succeed())
		got := expectRefused(s, claim, v1alpha1.ReasonInvalidVariables, nil)
		Expect(condition(got.Status.Conditions, v1alpha1.ConditionSynced).Message).To(ContainSubstring(`"mode"`))
	})

	It("a missing Secret key: SecretNotFound, and no command runs at all", func() {
		s := newScenario()
		Expect(k8s.Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "words"},
			Data: map[string][]byte{"other": []byte("x")}})).To(Succeed())
		Expect(k8s.Create(s.ctx, fileClass("secret-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.VariablesFrom = []v1alpha1.SecretInput{{Name: "secret_word",
				SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: s.ns, Name: "words", Key: "word"}}}
		}))).To(Succeed())
		got := expectRefused(s, fileClaim(s.ns, "secret", s.kind, s.dir, "x"), v1alpha1.ReasonSecretNotFound, nil)
		Expect(countOps("init", got.Name)).To(BeZero())
		Expect(condition(got.Status.Conditions, v1alpha1.ConditionSynced).Message).To(ContainSubstring(`no key "word"`))
	})
})

var _ = Describe("A failing apply", func() {
	It("reports Terraform's error in Ready=False and backs off instead of looping", func() {
		s := newScenario()
		// A file under a path that is a regular file: the local provider cannot create its directory.
		blocker := filepath.Join(s.dir, "blocker")
		Expect(os.WriteFile(blocker, []byte("x"), 0o600)).To(Succeed())
		claim := fileClaim(s.ns, "fails", s.kind, blocker, "x")
		Expect(k8s.Create(s.ctx, fileClass("fail-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		Eventually(func() string { return s.claim(claim)().Spec.ResourceName }, timeout).ShouldNot(BeEmpty())
		name := s.claim(claim)().Spec.ResourceName
		Eventually(func() string { return condition(s.resource(name)().Status.Conditions, v1alpha1.ConditionReady).Reason }, timeout, time.Second).
			Should(Equal(v1alpha1.ReasonApplyFailed))
		res := s.resource(name)()
		Expect(condition(res.Status.Conditions, v1alpha1.ConditionReady).Message).To(ContainSubstring("Error"))
		Expect(res.Status.Phase).To(Equal(v1alpha1.ResourceFailed), "and stays Failed while it is retried")
		// A retry records itself as Running before it starts; between retries the result is Failed.
		Eventually(func() v1alpha1.RunResult { return s.resource(name)().Status.LastRun.Result }, timeout, 100*time.Millisecond).Should(Equal(v1alpha1.RunFailed))
		Expect(readyStatus(s.claim(claim)())).To(Equal(metav1.ConditionFalse))

		// Backoff: retries after 1 s, 2 s, 4 s, 8 s… allow a handful in 20 seconds; a loop driven by
		// its own status writes would retry every run (about one a second or more).
		before := countOps("apply", name)
		time.Sleep(20 * time.Second)
		Expect(countOps("apply", name) - before).To(BeNumerically("<=", 8))
		Expect(countOps("apply", name)).To(BeNumerically(">=", 2), "a failed apply is retried")
	})
})

var _ = Describe("The runner pool", func() {
	It("never runs more than --max-concurrent-runs commands at once, and inits a module version once for all its resources", func() {
		s := newScenario()
		initsBefore := sharedInits()
		Expect(k8s.Create(s.ctx, fileClass("pool-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		claims := make([]*v1alpha1.InfraClaim, 5)
		var wg sync.WaitGroup
		for i := range claims {
			claims[i] = fileClaim(s.ns, fmt.Sprintf("p%d", i), s.kind, s.dir, "pool")
			wg.Add(1)
			go func(c *v1alpha1.InfraClaim) {
				defer GinkgoRecover()
				defer wg.Done()
				Expect(k8s.Create(s.ctx, c)).To(Succeed())
			}(claims[i])
		}
		wg.Wait()
		var names []string
		for _, c := range claims {
			_, res := s.ready(c)
			names = append(names, res.Name)
		}
		Expect(maxOverlap()).To(Equal(maxRuns), "the pool ran commands in parallel, up to its bound and not beyond")

		// One module version, one backend block (the state server's, configured per run): one
		// init for the five resources. The sync interval runs every resource again; none inits.
		for _, n := range names {
			Eventually(func() int { return runs(n) }, timeout, time.Second).Should(BeNumerically(">=", 2))
			Expect(countOps("init", n)).To(BeZero(), "resource %s ran init in its own directory", n)
			Expect(countOps("apply", n)).To(Equal(1), "resource %s: provisioned by one apply -json; later runs are read-only drift checks", n)
		}
		// Earlier specs may have initialised this module version already: then none at all.
		Expect(sharedInits()-initsBefore).To(BeNumerically("<=", 1), "at most one init for one module version")
		Expect(maxOverlap()).To(BeNumerically("<=", maxRuns))
	})
})
