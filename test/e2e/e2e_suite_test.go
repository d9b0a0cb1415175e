//go:build e2e

// Package e2e_test runs conductor-tf as users install it, on a real kind cluster: dist/install.yaml
// applied (and, once, the Helm chart dist/chart), the manager pod on a kubelet with its ServiceAccount
// token, leader election, probes and the metrics Service, and pods deleted mid-apply. hack/test-e2e.sh creates the cluster from the
// offline node image, loads the controller image and runs this suite (make test-e2e); it reads
// E2E_KUBECONFIG, E2E_IMG and E2E_CLUSTER.
//
// Modules reach the pods as classes name them in production, through git over HTTP: the suite
// serves a git repository of modules/ (tagged v0.1.0) from the test process on the kind network's
// gateway, with git's "dumb" HTTP protocol.
package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/conductor-tf/conductor-tf/test/harness"
)

const (
	system     = "conductor-system"
	deployment = "conductor-tf-controller-manager"
	timeout    = 5 * time.Minute
)

var (
	kubeconfig string
	cfg        *rest.Config
	k8s        client.Client
	kube       kubernetes.Interface
	// modulesURL stands in for the samples' git::https://github.com/conductor-tf/conductor-tf.git.
	modulesURL string
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "e2e")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	kubeconfig = os.Getenv("E2E_KUBECONFIG")
	Expect(kubeconfig).NotTo(BeEmpty(), "run through make test-e2e (hack/test-e2e.sh), which creates the cluster")
	var err error
	cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	k8s, err = harness.NewClient(cfg)
	Expect(err).NotTo(HaveOccurred())
	kube = kubernetes.NewForConfigOrDie(cfg)

	dir, err := os.MkdirTemp("", "conductor-e2e-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	modulesURL = serveModules(dir)

	By("installing dist/install.yaml, Rook's ObjectStore CRD and the rook-minio module's account")
	kubectl("apply", "--server-side", "-f", filepath.Join(harness.RepoRoot(), "dist", "install.yaml"))
	kubectl("apply", "--server-side", "-f", filepath.Join(harness.RepoRoot(), "test", "fixtures", "crds"))
	kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
	kubectl("apply", "-f", filepath.Join(harness.RepoRoot(), "config", "samples", "rook_minio_rbac.yaml"))
	start := time.Now()
	kubectl("-n", system, "rollout", "status", "deployment/"+deployment, "--timeout=5m")
	GinkgoWriter.Printf("the manager is available %s after install\n", time.Since(start).Round(time.Second))
})

// kubectl runs the project's kubectl against the cluster and returns its standard output; a failure
// fails the spec with kubectl's message.
func kubectl(args ...string) string {
	out, err := kubectlErr(args...)
	Expect(err).NotTo(HaveOccurred(), "kubectl %s", strings.Join(args, " "))
	return out
}

func kubectlErr(args ...string) (string, error) {
	return runOut(filepath.Join(os.Getenv("CONDUCTOR_TF_K8S_BIN"), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

// runOut runs a command and returns its standard output; its error carries its standard error.
func runOut(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), nil
}

// serveModules publishes modules/ and test/e2e/testdata/modules as one git repository tagged
// harness.ModulesVersion, serves it over HTTP on the kind network's gateway (where pods reach the
// host), and returns its git:: URL.
func serveModules(dir string) string {
	repo := filepath.Join(dir, "modules.git")
	_, err := harness.PublishModules(repo)
	Expect(err).NotTo(HaveOccurred())
	extra, _ := filepath.Abs(filepath.Join("testdata", "modules"))
	run(repo, "cp", "-R", extra+"/.", filepath.Join(repo, "modules"))
	run(repo, "git", "add", "-A")
	run(repo, "git", "-c", "user.name=e2e", "-c", "user.email=e2e@localhost", "-c", "commit.gpgsign=false", "commit", "-qm", "e2e modules")
	run(repo, "git", "-c", "tag.gpgsign=false", "tag", "-f", harness.ModulesVersion)
	// The dumb protocol reads info/refs and objects as plain files.
	run(repo, "git", "update-server-info")

	gateway := kindGateway()
	l, err := net.Listen("tcp", net.JoinHostPort(gateway, "0"))
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: http.StripPrefix("/modules.git/", http.FileServer(http.Dir(filepath.Join(repo, ".git"))))}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	return "git::http://" + l.Addr().String() + "/modules.git"
}

// kindGateway is the IPv4 gateway of the kind network: the host, as the cluster's pods reach it.
func kindGateway() string {
	out, err := exec.Command("docker", "network", "inspect", "kind", "--format", "{{json .IPAM.Config}}").Output()
	Expect(err).NotTo(HaveOccurred())
	var configs []struct{ Gateway string }
	Expect(json.Unmarshal(out, &configs)).To(Succeed())
	for _, c := range configs {
		if ip := net.ParseIP(c.Gateway); ip != nil && ip.To4() != nil {
			return c.Gateway
		}
	}
	Fail("the kind network has no IPv4 gateway: " + string(out))
	return ""
}

func run(dir string, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "%s %v: %s", name, args, out)
}

// eventually polls f every two seconds for timeout.
func eventually(f any) AsyncAssertion {
	return Eventually(f, timeout, 2*time.Second)
}

var ctx = context.Background()
