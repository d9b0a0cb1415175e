//go:build modules

// Package modules_test applies the cloud modules the project ships through classes and claims, as
// a platform team would: the real controller binary (cmd/conductor-tf) against an API server
// (envtest), real OpenTofu, and the real hashicorp/google and hashicorp/aws providers built from
// the Go module proxy (hack/tools.sh cloud-providers), pointed at emulators on loopback:
//
//   - gcs-bucket is applied and destroyed against fake-gcs-server (github.com/fsouza/fake-gcs-server)
//     through the provider's custom storage endpoint and a fake access token;
//   - aws-rds is planned (approval: Manual holds the plan) with fake credentials and the AWS SDK's
//     endpoints on loopback; no AWS API emulator builds from the Go module proxy, so it is not applied.
//
// make test-modules (hack/test-modules.sh) builds what it needs and runs it; .ci/run runs it only
// when the providers are already built.
package modules_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

const (
	// stateNamespace is the controller's namespace: state, plans and the classes' env Secrets.
	stateNamespace = "conductor-system"
	timeout        = 5 * time.Minute
)

var (
	ctx        = context.Background()
	env        *harness.Env
	k8s        client.Client
	modulesURL string
	suiteDir   string
)

func TestModules(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "modules")
}

var _ = BeforeSuite(func() {
	dir, err := os.MkdirTemp("", "conductor-modules-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	suiteDir = dir
	env, err = harness.Start(dir, harness.CRDDir())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(env.Stop)
	k8s, err = env.Client()
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stateNamespace}})).To(Succeed())
	modulesURL, err = harness.PublishModules(filepath.Join(dir, "modules.git"))
	Expect(err).NotTo(HaveOccurred())

	bin, err := harness.BuildController(dir)
	Expect(err).NotTo(HaveOccurred())
	tfEnv, err := harness.TerraformEnv(filepath.Join(dir, "home"))
	Expect(err).NotTo(HaveOccurred())
	c, err := env.StartController(bin, filepath.Join(dir, "controller.log"), tfEnv,
		"--namespace", stateNamespace, "--work-dir", filepath.Join(dir, "work"),
		"--terraform-path", os.Getenv("CONDUCTOR_TF_TOFU"), "--max-concurrent-runs", "2",
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--zap-devel=false")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Stop)
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "controller.log"))
			GinkgoWriter.Printf("--- controller log ---\n%s\n", tail(string(b), 60))
		}
	})
})

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := 0
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if lines++; lines > n {
				return s[i+1:]
			}
		}
	}
	return s
}

// workload returns the path of a binary hack/tools.sh built into CONDUCTOR_TF_WORKLOAD_BIN; the
// suite fails, saying how to build it, when it is missing.
func workload(name string) string {
	p := filepath.Join(os.Getenv("CONDUCTOR_TF_WORKLOAD_BIN"), name)
	_, err := os.Stat(p)
	Expect(err).NotTo(HaveOccurred(), "%s is built by hack/tools.sh cloud-providers (make test-modules)", name)
	return p
}

// sampleClass returns the sample class named name and a sample claim of its kind named claim,
// module sources rewritten to the suite's published modules.
func sampleClass(name, claim string) (*v1alpha1.InfraClass, *v1alpha1.InfraClaim) {
	samples, err := harness.LoadSamples(modulesURL)
	Expect(err).NotTo(HaveOccurred())
	cl, c, err := samples.ClassAndClaim(name, claim)
	Expect(err).NotTo(HaveOccurred())
	return cl, c
}

// envSecret creates a Secret in the controller's namespace holding vars and returns the class env
// entries that read each of them.
func envSecret(name string, vars map[string]string) []v1alpha1.SecretInput {
	Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: stateNamespace}, StringData: vars})).To(Succeed())
	var out []v1alpha1.SecretInput
	for k := range vars {
		out = append(out, v1alpha1.SecretInput{Name: k, SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: stateNamespace, Name: name, Key: k}})
	}
	return out
}

// newNamespace creates a namespace for one spec's claims.
func newNamespace(prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// createClass creates class and waits until it is Ready (its module fetched and read).
func createClass(class *v1alpha1.InfraClass) {
	Expect(k8s.Create(ctx, class)).To(Succeed())
	DeferCleanup(func() { _ = k8s.Delete(ctx, class) })
	Eventually(func() string { return conditionOf(class, v1alpha1.ConditionReady) }, timeout, time.Second).Should(HavePrefix("True"))
}

// conditionOf reads obj again and returns its condition t as "Status Reason: message".
func conditionOf(obj client.Object, t string) string {
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	var conds []metav1.Condition
	switch o := obj.(type) {
	case *v1alpha1.InfraClass:
		conds = o.Status.Conditions
	case *v1alpha1.InfraClaim:
		conds = o.Status.Conditions
	case *v1alpha1.InfraResource:
		conds = o.Status.Conditions
	}
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return string(c.Status) + " " + c.Reason + ": " + c.Message
	}
	return ""
}

// resourceOf returns the resource a claim is bound to, once it is.
func resourceOf(claim *v1alpha1.InfraClaim) *v1alpha1.InfraResource {
	Eventually(func() string {
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
		return claim.Status.ResourceName
	}, timeout, time.Second).ShouldNot(BeEmpty())
	res := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: claim.Status.ResourceName}}
	Expect(k8s.Get(ctx, client.ObjectKeyFromObject(res), res)).To(Succeed())
	return res
}

// gone reports whether reading obj finds nothing.
func gone(obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
}
