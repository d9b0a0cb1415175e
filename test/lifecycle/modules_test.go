package lifecycle_test

// Issue 20: modules as platform teams write them. Each spec names what it saw on main at 3770649
// (before the change) where it is a defect.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	claimcontroller "github.com/conductor-tf/conductor-tf/internal/controller/claim"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// typedClass is a class over testdata/modules/typed with the object values given as JSON.
func typedClass(s *scenario, name, kind, settings string) *v1alpha1.InfraClass {
	src, _ := filepath.Abs("testdata/modules/typed")
	c := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{
			ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module: v1alpha1.ModuleSource{Source: src, Version: "v1.0.0"},
			Variables: v1alpha1.Variables{
				"path":     js(`"${claim.spec.parameters.dir}/${claim.namespace}-${claim.name}.json"`),
				"settings": js(settings),
				"rules":    js(`[{"port": 443}]`),
				"limits":   js(`{"app": {"memory": "1Gi"}}`),
			},
		},
	}
	Expect(k8s.Create(s.ctx, c)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(s.ctx, c) })
	return c
}

// classReady is the class's Ready condition as "Status Reason: Message".
func classReady(s *scenario, name string) func() string {
	return func() string {
		c := &v1alpha1.InfraClass{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: name}, c)).To(Succeed())
		cond := condition(c.Status.Conditions, v1alpha1.ConditionReady)
		return fmt.Sprintf("%s %s: %s", cond.Status, cond.Reason, cond.Message)
	}
}

var _ = Describe("Modules typed as public modules are", func() {
	It("a class over optional(T, default) attributes is Ready, Terraform fills the defaults in, and a wrong type is refused with its path", func() {
		// Seen on 3770649: the class was ModuleInvalid, "Optional attribute modifier expects only
		// one argument: the attribute type".
		s := newScenario()
		class := typedClass(s, "typed-"+s.ns, s.kind, `{"name": "${claim.name}", "backup": {"retention": 30}}`)
		Eventually(classReady(s, class.Name), timeout, time.Second).Should(HavePrefix("True"))

		claim := &v1alpha1.InfraClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "typed"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: s.kind,
				Parameters:                 v1alpha1.Variables{"dir": js(fmt.Sprintf("%q", s.dir))},
				WriteConnectionSecretToRef: &v1alpha1.LocalSecretReference{Name: "typed-conn"}},
		}
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		s.ready(claim)
		file := filepath.Join(s.dir, s.ns+"-typed.json")
		var got struct {
			Settings struct {
				Name   string
				Size   float64
				Tier   string
				Backup struct {
					Enabled   bool
					Retention float64
				}
			}
			Rules []struct {
				Port     float64
				Protocol string
			}
			Limits map[string]struct{ CPU, Memory string }
		}
		Expect(json.Unmarshal([]byte(fileContent(file)), &got)).To(Succeed(), fileContent(file))
		Expect(got.Settings.Name).To(Equal("typed"))
		Expect(got.Settings.Size).To(Equal(10.0), "optional(number, 10)")
		Expect(got.Settings.Tier).To(Equal("standard"))
		Expect(got.Settings.Backup.Enabled).To(BeTrue(), "a nested default inside a default object")
		Expect(got.Settings.Backup.Retention).To(Equal(30.0), "the class's value wins over the default")
		Expect(got.Rules).To(HaveLen(1))
		Expect(got.Rules[0].Protocol).To(Equal("tcp"), "a default inside a list's objects")
		Expect(got.Limits["app"].CPU).To(Equal("100m"), "a default inside a map's objects")

		By("a class giving an optional attribute the wrong type: refused before any claim, naming the attribute")
		bad := typedClass(s, "typed-bad-"+s.ns, s.kind+"Bad", `{"name": "x", "size": "big"}`)
		Eventually(classReady(s, bad.Name), timeout, time.Second).Should(And(
			HavePrefix("False "+v1alpha1.ReasonTemplateInvalid), ContainSubstring(".size: a number is required")))

		By("deleting the claim destroys what the typed module made")
		Expect(k8s.Delete(s.ctx, s.claim(claim)())).To(Succeed())
		Eventually(func() bool { _, err := os.Stat(file); return os.IsNotExist(err) }, timeout, time.Second).Should(BeTrue())
	})
})

var _ = Describe("A class that turns Ready", func() {
	It("wakes its Pending claims at once, not at their next resync", func() {
		// Seen on 3770649: the class's Ready status is not a generation change, so the claim
		// waited for its PendingResync (a minute) after the class turned Ready.
		s := newScenario()
		class := typedClass(s, "wake-"+s.ns, s.kind, `{"name": "x", "size": "big"}`)
		Eventually(classReady(s, class.Name), timeout, time.Second).Should(HavePrefix("False " + v1alpha1.ReasonTemplateInvalid))
		claim := &v1alpha1.InfraClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "wake"},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: s.kind,
				Parameters: v1alpha1.Variables{"dir": js(fmt.Sprintf("%q", s.dir))}},
		}
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		Eventually(func() string { return condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionReady).Message }, timeout, time.Second).
			Should(ContainSubstring("is not ready"))

		By("fixing the class: once its module is checked it turns Ready, and the claim is bound right then")
		fixed := &v1alpha1.InfraClass{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: class.Name}, fixed)).To(Succeed())
		fixed.Spec.Variables["settings"] = js(`{"name": "${claim.name}"}`)
		Expect(k8s.Update(s.ctx, fixed)).To(Succeed())
		Eventually(classReady(s, class.Name), timeout, 100*time.Millisecond).Should(HavePrefix("True"))
		readyAt := time.Now()
		Eventually(func() string { return s.claim(claim)().Spec.ResourceName }, claimcontroller.PendingResync/3, 100*time.Millisecond).
			ShouldNot(BeEmpty(), "bound well before the claim's next resync (%s)", claimcontroller.PendingResync)
		GinkgoWriter.Printf("claim bound %s after its class turned Ready (resync: %s)\n", time.Since(readyAt).Round(10*time.Millisecond), claimcontroller.PendingResync)
		s.ready(claim)
		Expect(k8s.Delete(s.ctx, s.claim(claim)())).To(Succeed())
	})
})

var _ = Describe("The connection Secret", func() {
	It("is written again from the state when deleted, and moved when the claim renames it, without a run", func() {
		// Seen on 3770649: the deleted Secret stayed missing while the claim said Ready=True.
		s := newScenario()
		class := fileClass("conn-"+s.ns, s.kind, v1alpha1.ReclaimDelete)
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(s.ctx, class) })
		claim := fileClaim(s.ns, "conn", s.kind, s.dir, "hi")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		secret := func(name string) func() string {
			return func() string {
				got := &corev1.Secret{}
				if err := k8s.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, got); err != nil {
					return "<" + err.Error() + ">"
				}
				return string(got.Data["password"])
			}
		}
		password := secret("conn-conn")()
		Expect(password).To(HaveLen(20))
		Expect(s.resource(res.Name)().Status.ConnectionSecret).To(Equal(&v1alpha1.SecretReference{Namespace: s.ns, Name: "conn-conn"}))
		before := runs(res.Name)

		By("deleting the Secret by hand: the next sync writes it again from the state's outputs")
		Expect(k8s.Delete(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "conn-conn"}})).To(Succeed())
		touch := func(value string) {
			got := s.claim(claim)()
			if got.Annotations == nil {
				got.Annotations = map[string]string{}
			}
			got.Annotations["example.com/touched"] = value
			Expect(k8s.Update(s.ctx, got)).To(Succeed())
		}
		touch("1") // a sync: the resource controller watches its claim
		Eventually(secret("conn-conn"), timeout, time.Second).Should(Equal(password))

		By("renaming it on the claim: written under the new name, the old one deleted")
		got := s.claim(claim)()
		got.Spec.WriteConnectionSecretToRef.Name = "conn-renamed"
		Expect(k8s.Update(s.ctx, got)).To(Succeed())
		Eventually(secret("conn-renamed"), timeout, time.Second).Should(Equal(password))
		Eventually(secret("conn-conn"), timeout, time.Second).Should(ContainSubstring("not found"))
		Expect(s.resource(res.Name)().Status.ConnectionSecret.Name).To(Equal("conn-renamed"))
		Expect(runs(res.Name)).To(Equal(before), "outputs come from the state: no plan, no apply")
		Expect(readyStatus(s.claim(claim)())).To(Equal(metav1.ConditionTrue))
	})
})

var _ = Describe("A rotated Secret input", func() {
	It("applies the resource once with the new value, recording a hash of the inputs and never the value", func() {
		// Seen on 3770649: the file kept the old word; drift checks (policy Report here) only
		// reported the difference, and nothing applied until the spec changed.
		s := newScenario()
		words := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "words"}, Data: map[string][]byte{"word": []byte("alpha")}}
		Expect(k8s.Create(s.ctx, words)).To(Succeed())
		class := fileClass("rotate-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.VariablesFrom = []v1alpha1.SecretInput{{Name: "secret_word",
				SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: s.ns, Name: "words", Key: "word"}}}
			c.Spec.Operations.DriftPolicy = v1alpha1.DriftReport
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(s.ctx, class) })
		claim := fileClaim(s.ns, "rotate", s.kind, s.dir, "hi")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		file := filepath.Join(s.dir, s.ns+"-rotate.txt")
		Expect(fileContent(file)).To(Equal("hello hi\nalpha"))
		first := s.resource(res.Name)().Status.InputsHash
		Expect(first).To(HavePrefix("sha256:"))

		By("rotating the Secret: the next sync applies the new value")
		Expect(k8s.Get(s.ctx, client.ObjectKeyFromObject(words), words)).To(Succeed())
		words.Data["word"] = []byte("beta")
		Expect(k8s.Update(s.ctx, words)).To(Succeed())
		Eventually(func() string { return fileContent(file) }, timeout, time.Second).Should(Equal("hello hi\nbeta"))
		Eventually(func() string { return s.resource(res.Name)().Status.InputsHash }, timeout, time.Second).ShouldNot(Equal(first))
		Expect(eventReasons(s, res.Name)).To(ContainElement(HavePrefix("SecretInputsChanged")))
		got, err := json.Marshal(s.resource(res.Name)().Status)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(got)).NotTo(Or(ContainSubstring("alpha"), ContainSubstring("beta")), "status holds no value")
		Expect(readyStatus(s.claim(claim)())).To(Equal(metav1.ConditionTrue))
	})
})

var _ = Describe("A claim's requests", func() {
	// The file's content shows the rendered capacity.
	sized := func(c *v1alpha1.InfraClass) {
		c.Spec.Variables["content"] = js(`"hello ${claim.spec.parameters.greeting} ${gibibytes(claim.spec.resources.requests.storage)}GiB"`)
	}
	request := func(s *scenario, claim *v1alpha1.InfraClaim, q string) {
		got := s.claim(claim)()
		got.Spec.Resources.Requests["storage"] = resource.MustParse(q)
		Expect(k8s.Update(s.ctx, got)).To(Succeed())
	}
	storage := func(q v1alpha1.Quantities) string { v := q["storage"]; return v.String() }
	resized := func(s *scenario, claim *v1alpha1.InfraClaim) func() string {
		return func() string {
			c := condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionResized)
			return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
		}
	}

	It("grow only when the class allows expansion, and never shrink: refused changes reach nothing", func() {
		// Seen on 3770649: no Resized condition ever came; rerender copied any new request,
		// grown or shrunk, into the resource's capacity and variables whatever the class said.
		s := newScenario()
		Expect(k8s.Create(s.ctx, fileClass("fixed-"+s.ns, s.kind, v1alpha1.ReclaimDelete, sized))).To(Succeed())
		claim := fileClaim(s.ns, "fixed", s.kind, s.dir, "hi")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		file := filepath.Join(s.dir, s.ns+"-fixed.txt")
		Expect(fileContent(file)).To(Equal("hello hi 1GiB"))
		request(s, claim, "2Gi")
		Eventually(resized(s, claim), timeout, time.Second).Should(HavePrefix("False " + v1alpha1.ReasonExpansionNotAllowed))
		Consistently(func() string { return fileContent(file) }, 4*time.Second, time.Second).Should(Equal("hello hi 1GiB"))
		Expect(storage(s.resource(res.Name)().Spec.Capacity)).To(Equal("1Gi"))

		By("a class with allowExpansion: the capacity and the variables follow, and apply")
		kind := s.kind + "X"
		Expect(k8s.Create(s.ctx, fileClass("grow-"+s.ns, kind, v1alpha1.ReclaimDelete, sized,
			func(c *v1alpha1.InfraClass) { c.Spec.AllowExpansion = true }))).To(Succeed())
		grow := fileClaim(s.ns, "grow", kind, s.dir, "hi")
		Expect(k8s.Create(s.ctx, grow)).To(Succeed())
		_, gres := s.ready(grow)
		gfile := filepath.Join(s.dir, s.ns+"-grow.txt")
		request(s, grow, "3Gi")
		Eventually(func() string { return fileContent(gfile) }, timeout, time.Second).Should(Equal("hello hi 3GiB"))
		Expect(storage(s.resource(gres.Name)().Spec.Capacity)).To(Equal("3Gi"))
		Eventually(func() string { return storage(s.claim(grow)().Status.Capacity) }, timeout, time.Second).Should(Equal("3Gi"))

		By("shrinking: refused, whatever the class allows")
		request(s, grow, "1Gi")
		Eventually(resized(s, grow), timeout, time.Second).Should(HavePrefix("False " + v1alpha1.ReasonShrinkNotSupported))
		Consistently(func() string { return fileContent(gfile) }, 4*time.Second, time.Second).Should(Equal("hello hi 3GiB"))
		Expect(storage(s.resource(gres.Name)().Spec.Capacity)).To(Equal("3Gi"))
	})
})

// twoVersions makes a git repository of the file module tagged v1.0.0, and v1.1.0 with one more
// output (module_version), and returns its git::file:// source.
func twoVersions() string {
	repo := GinkgoT().TempDir()
	main, err := os.ReadFile("testdata/modules/file/main.tf")
	Expect(err).NotTo(HaveOccurred())
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@localhost",
			"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "git %v: %s", args, out)
	}
	git("init", "-q")
	Expect(os.WriteFile(filepath.Join(repo, "main.tf"), main, 0o644)).To(Succeed())
	git("add", "-A")
	git("commit", "-qm", "v1.0.0")
	git("tag", "v1.0.0")
	next := append(main, []byte("\noutput \"module_version\" {\n  value = \"1.1.0\"\n}\n")...)
	Expect(os.WriteFile(filepath.Join(repo, "main.tf"), next, 0o644)).To(Succeed())
	git("commit", "-qam", "v1.1.0")
	git("tag", "v1.1.0")
	return "git::file://" + repo
}

var _ = Describe("A class that moves to a newer module version", func() {
	It("leaves its resources pinned and says UpgradeAvailable; a resource upgraded by its spec applies the new version", func() {
		// Seen on 3770649: nothing said the class had moved (no condition, no status field).
		s := newScenario()
		src := twoVersions()
		class := fileClass("upgrade-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
			c.Spec.Module = v1alpha1.ModuleSource{Source: src, Version: "v1.0.0"}
		})
		Expect(k8s.Create(s.ctx, class)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(s.ctx, class) })
		claim := fileClaim(s.ns, "upgrade", s.kind, s.dir, "hi")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		_, res := s.ready(claim)
		Expect(res.Status.ModuleVersion).To(Equal("v1.0.0"))
		upgrade := func() string {
			r := s.resource(res.Name)()
			c := condition(r.Status.Conditions, v1alpha1.ConditionUpgradeAvailable)
			return fmt.Sprintf("%s %s %s", c.Status, c.Reason, r.Status.AvailableModuleVersion)
		}
		Expect(upgrade()).To(Equal("False UpToDate "))

		By("the class moves to v1.1.0: the resource stays on v1.0.0 and says an upgrade is available")
		moved := &v1alpha1.InfraClass{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: class.Name}, moved)).To(Succeed())
		moved.Spec.Module.Version = "v1.1.0"
		Expect(k8s.Update(s.ctx, moved)).To(Succeed())
		Eventually(upgrade, timeout, time.Second).Should(Equal("True NewerVersion v1.1.0"))
		r := s.resource(res.Name)()
		Expect(r.Spec.Module.Version).To(Equal("v1.0.0"))
		Expect(r.Status.Outputs).NotTo(HaveKey("module_version"))

		By("kubectl conductor upgrade --dry-run lists the move and changes nothing")
		plugin, err := harness.BuildPlugin(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		conductor := func(args ...string) string {
			out, err := exec.Command(plugin, append(args, "--kubeconfig", env.Kubeconfig)...).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
			return string(out)
		}
		out := conductor("upgrade", "upgrade", "-n", s.ns, "--dry-run")
		Expect(out).To(ContainSubstring("Would upgrade (dry run, nothing changed)"))
		Expect(out).To(MatchRegexp(res.Name + ` +` + s.ns + `/upgrade +v1\.0\.0 +v1\.1\.0`))
		Expect(s.resource(res.Name)().Spec.Module.Version).To(Equal("v1.0.0"))

		By("an upgrade to a version that does not exist fails: the resource stays on v1.0.0, with the reason")
		out = conductor("upgrade", "upgrade", "-n", s.ns, "--to", "v9.9.9", "--wait", "3m")
		Expect(out).To(ContainSubstring("the upgrade to v9.9.9 failed and the resource stays on v1.0.0: "))
		r = s.resource(res.Name)()
		Expect(r.Status.ModuleVersion).To(Equal("v1.0.0"))
		Expect(condition(r.Status.Conditions, v1alpha1.ConditionSynced).Status).To(Equal(metav1.ConditionFalse))
		Expect(fileContent(filepath.Join(s.dir, s.ns+"-upgrade.txt"))).To(Equal("hello hi"), "nothing applied")

		By("kubectl conductor upgrade (through the claim) sets spec.module.version, and --wait shows the apply of v1.1.0")
		out = conductor("upgrade", "upgrade", "-n", s.ns, "--to", "v1.1.0", "--wait", "3m")
		Expect(out).To(ContainSubstring("InfraResource " + res.Name + ": applied module version v1.1.0"))
		Expect(s.resource(res.Name)().Status.ModuleVersion).To(Equal("v1.1.0"))
		Expect(s.resource(res.Name)().Status.Outputs).To(HaveKey("module_version"))
		Expect(upgrade()).To(Equal("False UpToDate "))
		Expect(readyStatus(s.claim(claim)())).To(Equal(metav1.ConditionTrue))
	})
})

// automaticClaim makes a class of the two-version file module at v1.0.0 with upgradePolicy
// Automatic and a claim of it called name, and returns them once the claim is Ready, with its resource.
func automaticClaim(name string) (*scenario, *v1alpha1.InfraClass, *v1alpha1.InfraClaim, *v1alpha1.InfraResource) {
	s := newScenario()
	class := fileClass(name+"-"+s.ns, s.kind, v1alpha1.ReclaimDelete, func(c *v1alpha1.InfraClass) {
		c.Spec.Module = v1alpha1.ModuleSource{Source: twoVersions(), Version: "v1.0.0"}
		c.Spec.UpgradePolicy = v1alpha1.UpgradeAutomatic
	})
	Expect(k8s.Create(s.ctx, class)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(s.ctx, class) })
	claim := fileClaim(s.ns, name, s.kind, s.dir, "hi")
	Expect(k8s.Create(s.ctx, claim)).To(Succeed())
	_, res := s.ready(claim)
	return s, class, claim, res
}

var _ = Describe("A class with upgradePolicy Automatic", func() {
	It("moves its resources to its newer module version, variables rendered again, and applies it", func() {
		s, class, _, res := automaticClaim("auto")
		Expect(res.Status.ModuleVersion).To(Equal("v1.0.0"))

		moved := &v1alpha1.InfraClass{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: class.Name}, moved)).To(Succeed())
		moved.Spec.Module.Version = "v1.1.0"
		moved.Spec.Variables["content"] = js(`"upgraded ${claim.spec.parameters.greeting}"`)
		Expect(k8s.Update(s.ctx, moved)).To(Succeed())
		Eventually(func() string { return s.resource(res.Name)().Status.ModuleVersion }, timeout, time.Second).Should(Equal("v1.1.0"))
		r := s.resource(res.Name)()
		Expect(r.Spec.Module.Version).To(Equal("v1.1.0"))
		Expect(r.Status.Outputs).To(HaveKey("module_version"))
		Expect(fileContent(filepath.Join(s.dir, s.ns+"-auto.txt"))).To(Equal("upgraded hi"), "the class's template for v1.1.0")
		Expect(eventReasons(s, res.Name)).To(ContainElement(HavePrefix("Upgrading")))
	})

	// Issue 33: an Automatic upgrade rendered the claim's latest requests, which expansion had
	// refused, and so carried them into the resource.
	It("does not carry a refused expansion in: the resource stays on its version until the claim is accepted again", func() {
		s, class, claim, res := automaticClaim("refused")

		grown := s.claim(claim)()
		grown.Spec.Resources.Requests["storage"] = resource.MustParse("5Gi")
		Expect(k8s.Update(s.ctx, grown)).To(Succeed())
		Eventually(func() string {
			return condition(s.claim(claim)().Status.Conditions, v1alpha1.ConditionResized).Reason
		}, timeout, time.Second).Should(Equal(v1alpha1.ReasonExpansionNotAllowed))

		moved := &v1alpha1.InfraClass{}
		Expect(k8s.Get(s.ctx, client.ObjectKey{Name: class.Name}, moved)).To(Succeed())
		moved.Spec.Module.Version = "v1.1.0"
		moved.Spec.Variables["content"] = js(`"upgraded ${claim.spec.resources.requests.storage}"`)
		Expect(k8s.Update(s.ctx, moved)).To(Succeed())
		Eventually(func() []string { return eventReasons(s, res.Name) }, timeout, time.Second).
			Should(ContainElement(And(HavePrefix(v1alpha1.ReasonRenderFailed), ContainSubstring("not upgraded to v1.1.0"))))
		Consistently(func() string { return s.resource(res.Name)().Spec.Module.Version }, 5*time.Second, time.Second).Should(Equal("v1.0.0"))
		capacity := s.resource(res.Name)().Spec.Capacity["storage"]
		Expect(capacity.String()).To(Equal("1Gi"))
		Expect(fileContent(filepath.Join(s.dir, s.ns+"-refused.txt"))).To(Equal("hello hi"))
	})
})
