//go:build e2e

package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

const (
	helmRelease   = "conductor-helm"
	helmNamespace = "conductor-helm"
)

// helmValues installs the e2e image with two replicas, beside the CRDs dist/install.yaml installed,
// with every kind of value the chart offers set to something the spec can see.
func helmValues() string {
	repo, tag, _ := strings.Cut(os.Getenv("E2E_IMG"), ":")
	return `crd: {enable: false}
controllerManager:
  replicas: 2
  image: {repository: ` + repo + `, tag: "` + tag + `", pullPolicy: IfNotPresent}
  extraArgs: [--sync-interval=20m]
  extraEnv: [{name: CONDUCTOR_E2E_INSTALL, value: helm}]
  resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {cpu: "1", memory: 1Gi}}
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
providerMirror:
  # The image's own mirror, named by the chart's ConfigMap instead of the image's TF_CLI_CONFIG_FILE.
  cliConfig: |
    provider_installation {
      filesystem_mirror {
        path    = "/opt/conductor-tf/providers/mirror"
        include = ["registry.opentofu.org/hashicorp/*"]
      }
    }
`
}

func helm(args ...string) string {
	bin := os.Getenv("CONDUCTOR_TF_HELM")
	Expect(bin).NotTo(BeEmpty(), "CONDUCTOR_TF_HELM: run through make test-e2e")
	out, err := runOut(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	Expect(err).NotTo(HaveOccurred(), "helm %s: %s", strings.Join(args, " "), out)
	return out
}

var _ = Describe("Installed with the Helm chart", Ordered, func() {
	It("runs two replicas with the chart's values, turns a claim Ready and reclaims it", func() {
		By("stopping the manager dist/install.yaml installed: one controller reconciles at a time")
		kubectl("-n", system, "scale", "deployment/"+deployment, "--replicas=0")
		DeferCleanup(func() {
			kubectl("-n", system, "scale", "deployment/"+deployment, "--replicas=1")
			kubectl("-n", system, "rollout", "status", "deployment/"+deployment, "--timeout=5m")
		})
		kubectl("-n", system, "wait", "--for=delete", "pod", "-l", "control-plane=controller-manager", "--timeout=3m")

		By("helm install " + helmRelease + " dist/chart")
		values := filepath.Join(GinkgoT().TempDir(), "values.yaml")
		Expect(os.WriteFile(values, []byte(helmValues()), 0o600)).To(Succeed())
		start := time.Now()
		helm("install", helmRelease, filepath.Join(harness.RepoRoot(), "dist", "chart"), "--namespace", helmNamespace,
			"--create-namespace", "--values", values, "--wait", "--timeout", "5m")
		GinkgoWriter.Printf("helm install: 2 replicas available in %s\n", time.Since(start).Round(time.Second))
		DeferCleanup(func() {
			helm("uninstall", helmRelease, "--namespace", helmNamespace, "--wait", "--timeout", "3m")
			_ = kube.CoreV1().Namespaces().Delete(ctx, helmNamespace, metav1.DeleteOptions{})
		})

		pods, err := kube.CoreV1().Pods(helmNamespace).List(ctx, metav1.ListOptions{LabelSelector: "control-plane=controller-manager"})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("kubernetes.io/os", "linux"))
			Expect(p.Spec.Tolerations).To(ContainElement(HaveField("Key", "node-role.kubernetes.io/control-plane")))
			c := p.Spec.Containers[0]
			Expect(c.Image).To(Equal(os.Getenv("E2E_IMG")))
			Expect(c.Resources.Limits.Memory().String()).To(Equal("1Gi"))
			Expect(c.Args).To(ContainElements("--leader-elect", "--sync-interval=20m", "--metrics-bind-address=:8443"))
			Expect(c.Env).To(ContainElements(
				corev1.EnvVar{Name: "CONDUCTOR_E2E_INSTALL", Value: "helm"},
				corev1.EnvVar{Name: "TF_CLI_CONFIG_FILE", Value: "/etc/conductor-tf/terraform.rc"}))
		}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: helmRelease + "-controller-manager-metrics-service"}, &corev1.Service{})).To(Succeed())

		By("a claim of a class over the slowpass module, run by the chart's manager with the chart's CLI configuration")
		slowClass("e2e-helm", "HelmPass")
		claim := slowClaim(newNamespace("e2e-helm-"), "pass", "HelmPass", "hello")
		start = time.Now()
		Expect(k8s.Create(ctx, claim)).To(Succeed())
		eventually(converged(claim, "hello")).Should(HavePrefix("True"))
		GinkgoWriter.Printf("claim Ready in %s under the chart's manager\n", time.Since(start).Round(time.Second))
		res := resourceOf(claim)
		Expect(res.Status.LastRun.Controller).To(HavePrefix(helmRelease+"-controller-manager"), "the chart's manager ran it")
		states := func() string {
			return strings.TrimSpace(kubectl("get", "secrets", "-n", helmNamespace, "-l", "conductor.io/resource="+res.Name, "-o", "name"))
		}
		Expect(states()).NotTo(BeEmpty(), "state lives in the release's namespace")

		By("a claim on a runner pool under the release's name: its runners reach " + helmRelease + "-runs (issue 45)")
		pool := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: "e2e-helm"},
			Spec: v1alpha1.InfraRunnerPoolSpec{Replicas: ptr.To[int32](1), Concurrency: 1}}
		Expect(k8s.Create(ctx, pool)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(ctx, pool) })
		slowClass("e2e-helm-pooled", "HelmPooled", func(c *v1alpha1.InfraClass) { c.Spec.RunnerPool = pool.Name })
		pooled := slowClaim(newNamespace("e2e-helm-pool-"), "pooled", "HelmPooled", "pooled")
		Expect(k8s.Create(ctx, pooled)).To(Succeed())
		eventually(converged(pooled, "pooled")).Should(HavePrefix("True"))
		// A pool's run waits for a runner (WaitingForRunner) until one connects: Ready says a runner
		// reached the release's Service and the certificate signed for it.
		Expect(resourceOf(pooled).Spec.RunnerPool).To(Equal(pool.Name))
		Expect(k8s.Delete(ctx, pooled)).To(Succeed())

		By("deleting the claim: the chart's manager destroys and reclaims")
		Expect(k8s.Delete(ctx, claim)).To(Succeed())
		eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: res.Name}, &v1alpha1.InfraResource{}))
		}).Should(BeTrue())
		Expect(states()).To(BeEmpty())
	})
})
