package access_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// Issue 45: a class whose module lives in a private git repository or registry. The class check
// and init fetch it with the class's moduleCredentials Secret; no plan or apply sees them.
var _ = Describe("Private module sources", func() {
	ctx := context.Background()

	// classOf publishes a class over source@version with creds (nil: none) and returns it once
	// its Ready condition has a reason.
	classOf := func(source, version string, creds *v1alpha1.LocalSecretReference) *v1alpha1.InfraClass {
		kind := "Private" + rand.String(6)
		c := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(kind)},
			Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
				Module:    v1alpha1.ModuleSource{Source: source, Version: version},
				RunInputs: v1alpha1.RunInputs{ModuleCredentials: creds},
				Variables: v1alpha1.Variables{"report": quoted("${claim.spec.parameters.report}")}}}
		Expect(admin.Create(ctx, c)).To(Succeed())
		Eventually(func() string {
			Expect(admin.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady); cond != nil {
				return cond.Reason
			}
			return ""
		}, timeout, time.Second).ShouldNot(BeEmpty())
		return c
	}
	readiness := func(c *v1alpha1.InfraClass) metav1.Condition {
		return *meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
	}
	secret := func(data map[string]string) *v1alpha1.LocalSecretReference {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: "modules-" + rand.String(6)}, StringData: data}
		Expect(admin.Create(ctx, s)).To(Succeed())
		return &v1alpha1.LocalSecretReference{Name: s.Name}
	}
	// provisioned claims one resource of class c and returns the environment its apply's
	// local-exec saw.
	provisioned := func(c *v1alpha1.InfraClass) string {
		t := newTeam(ctx)
		report := filepath.Join(reportDir(), "env")
		claim := t.claim(ctx, "private", c.Spec.ResourceKind, map[string]string{"report": report})
		Eventually(t.resourceOf(ctx, claim), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))
		Expect(t.resourceOf(ctx, claim)().Spec.ModuleCredentials).To(Equal(c.Spec.ModuleCredentials), "copied from the class")
		env, err := os.ReadFile(report)
		Expect(err).NotTo(HaveOccurred())
		return string(env)
	}
	// credentialFilesLeft lists source credential files under the controller's work directory.
	credentialFilesLeft := func() []string {
		var left []string
		_ = filepath.WalkDir(workDir, func(path string, d os.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), "conductor-git-credentials") {
				left = append(left, path)
			}
			return nil
		})
		return left
	}

	It("a git repository behind basic authentication: refused without the Secret, Ready with it, and no plan or apply sees it", func() {
		git, err := harness.StartGitServer(GinkgoT().TempDir(), filepath.Join(modules, "envprobe"), "v1", "platform", "s3cret-git")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(git.Close)
		source := git.URL + "//modules/envprobe"

		By("without credentials the class says the module cannot be fetched")
		refused := classOf(source, "v1", nil)
		Expect(readiness(refused).Reason).To(Equal(v1alpha1.ReasonModuleInvalid))
		Expect(readiness(refused).Message).To(ContainSubstring(git.Host))

		By("a Secret with the wrong keys, or one that does not exist, is named in the condition")
		bad := classOf(source, "v1", secret(map[string]string{"password": "s3cret-git"}))
		Expect(readiness(bad).Reason).To(Equal(v1alpha1.ReasonSecretInvalid))
		Expect(readiness(bad).Message).To(ContainSubstring("has keys password"))
		missing := classOf(source, "v1", &v1alpha1.LocalSecretReference{Name: "no-such-secret"})
		Expect(readiness(missing).Reason).To(Equal(v1alpha1.ReasonSecretNotFound))

		By("with the Secret the class is Ready and a claim provisions")
		c := classOf(source, "v1", secret(map[string]string{".git-credentials": "http://platform:s3cret-git@" + git.Host + "\n"}))
		Expect(readiness(c).Reason).To(Equal(v1alpha1.ReasonValid), readiness(c).Message)
		env := provisioned(c)
		Expect(env).NotTo(ContainSubstring("s3cret-git"))
		Expect(env).NotTo(ContainSubstring("GIT_CONFIG"))
		Expect(credentialFilesLeft()).To(BeEmpty())

		By("another class naming the same source and version without the Secret is still refused: what the first fetched is its credentials' own")
		again := classOf(source, "v1", nil)
		Expect(readiness(again).Reason).To(Equal(v1alpha1.ReasonModuleInvalid), readiness(again).Message)
	})

	It("a registry that wants a token: refused without the Secret, Ready with TF_TOKEN_<host>, and no plan or apply sees it", func() {
		registry.RequireToken("s3cret-registry")
		address := "platform/envprobe/local"
		_, err := registry.Publish(address, "1.0.0", filepath.Join(modules, "envprobe"))
		Expect(err).NotTo(HaveOccurred())
		source := registry.Host + "/" + address

		By("without the token the class says the module cannot be fetched")
		refused := classOf(source, "1.0.0", nil)
		Expect(readiness(refused).Reason).To(Equal(v1alpha1.ReasonModuleInvalid))
		Expect(readiness(refused).Message).To(ContainSubstring(registry.Host))

		By("with TF_TOKEN_<host> the class is Ready and a claim provisions")
		token := "TF_TOKEN_" + strings.ReplaceAll(registry.Host, ".", "_")
		c := classOf(source, "1.0.0", secret(map[string]string{token: "s3cret-registry"}))
		Expect(readiness(c).Reason).To(Equal(v1alpha1.ReasonValid), readiness(c).Message)
		env := provisioned(c)
		Expect(env).NotTo(ContainSubstring("s3cret-registry"))
		Expect(env).NotTo(ContainSubstring("TF_TOKEN_"))

		By("another class naming the same module without the token is still refused: the module cache is keyed by the credentials")
		again := classOf(source, "1.0.0", nil)
		Expect(readiness(again).Reason).To(Equal(v1alpha1.ReasonModuleInvalid), readiness(again).Message)
	})
})
