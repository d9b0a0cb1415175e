package statebackend

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/conductor-tf/conductor-tf/test/harness/apiserver"
)

// The package's tests run against a real kube-apiserver and etcd, started once in TestMain from
// KUBEBUILDER_ASSETS. test/harness cannot be imported here (it imports internal/tfrunner, which
// imports this package); its leaf test/harness/apiserver starts the API server. Like the
// harness, a run without the tools' environment fails with a message saying how to get it rather
// than skipping.

var (
	testKube       kubernetes.Interface
	testKubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	for _, v := range []string{"KUBEBUILDER_ASSETS", "CONDUCTOR_TF_TOFU", "TF_CLI_CONFIG_FILE"} {
		if os.Getenv(v) == "" {
			fmt.Fprintf(os.Stderr, "%s is not set: run the tests with `make test`, or with the environment of "+
				"`set -a; eval \"$(hack/tools.sh env)\"; set +a`\n", v)
			return 1
		}
	}
	dir, err := os.MkdirTemp("", "statebackend-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env, err := apiserver.Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	testKubeconfig = env.Kubeconfig
	testKube, err = kubernetes.NewForConfig(env.Config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T) string { return apiserver.NewNamespace(t, testKube, "sb-") }

// tfBinary is a Terraform or OpenTofu executable the end-to-end tests run.
type tfBinary struct{ name, path string }

// binaries returns the OpenTofu the tools built and the terraform on PATH; the test fails when
// terraform is missing, since reading Terraform's own layout is what these tests are about.
func binaries(t *testing.T) []tfBinary {
	t.Helper()
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("terraform is not on PATH: %v", err)
	}
	return []tfBinary{{"tofu", os.Getenv("CONDUCTOR_TF_TOFU")}, {"terraform", tf}}
}

// runTF runs bin with args in dir with only the given extra environment (plus PATH, HOME and the
// provider mirror) and returns its combined output.
func runTF(t *testing.T, bin, dir string, extraEnv []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	home := filepath.Join(dir, ".home")
	_ = os.MkdirAll(home, 0o700)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CHECKPOINT_DISABLE=1",
		"TF_CLI_CONFIG_FILE=" + os.Getenv("TF_CLI_CONFIG_FILE"), "TF_IN_AUTOMATION=1",
	}, extraEnv...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustTF is runTF that fails the test on error.
func mustTF(t *testing.T, bin, dir string, extraEnv []string, args ...string) string {
	t.Helper()
	out, err := runTF(t, bin, dir, extraEnv, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return out
}

// writeModule writes main.tf into a new directory and returns it.
func writeModule(t *testing.T, mainTF string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(mainTF), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
