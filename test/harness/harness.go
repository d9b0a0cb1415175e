// Package harness starts the real parts tests run against: an API server and etcd (envtest, with
// the binaries hack/tools.sh builds, found through KUBEBUILDER_ASSETS), the Terraform/OpenTofu
// binaries, and the provider mirror (TF_CLI_CONFIG_FILE). `make test` sets those variables; a test
// run without them fails with a message saying so rather than skipping.
package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// CRDDir is where controller-gen writes the CRDs.
func CRDDir() string { return filepath.Join(RepoRoot(), "config", "crd", "bases") }

// requireEnv returns the variable's value or an error that says to run through make.
func requireEnv(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s is not set: run the tests with `make test`, which builds the tools and sets it", name)
	}
	return v, nil
}

// Env is a running API server with a kubeconfig file for clients outside the test process
// (Terraform's kubernetes backend and provider).
type Env struct {
	*envtest.Environment
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for a cluster-admin user.
	Kubeconfig string
}

// Start starts etcd and kube-apiserver with the CRDs in crdDirs installed, and writes an admin
// kubeconfig into dir. Stop it with Env.Stop.
func Start(dir string, crdDirs ...string) (*Env, error) {
	assets, err := requireEnv("KUBEBUILDER_ASSETS")
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     crdDirs,
		ErrorIfCRDPathMissing: len(crdDirs) > 0,
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the API server from %s: %w", assets, err)
	}
	user, err := te.AddUser(envtest.User{Name: "conductor-admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		_ = te.Stop()
		return nil, err
	}
	return &Env{Environment: te, Config: cfg, Kubeconfig: path}, nil
}

// Binaries returns every Terraform/OpenTofu binary the tests run with: the OpenTofu that
// hack/tools.sh built (CONDUCTOR_TF_TOFU), and a terraform on PATH at or above the minimum version.
// It returns an error when there is none.
func Binaries(ctx context.Context) ([]tfrunner.Binary, error) {
	tofu, err := requireEnv("CONDUCTOR_TF_TOFU")
	if err != nil {
		return nil, err
	}
	candidates := []string{tofu}
	if p, err := exec.LookPath("terraform"); err == nil {
		candidates = append(candidates, p)
	}
	bins := tfrunner.FindAll(ctx, nil, candidates...)
	if len(bins) == 0 {
		return nil, fmt.Errorf("no usable tofu/terraform among %v", candidates)
	}
	return bins, nil
}

// TerraformEnv is the whole environment of Terraform commands in tests: PATH (for git), a HOME of
// their own, and the CLI config that installs providers only from the local mirror.
func TerraformEnv(home string) (map[string]string, error) {
	rc, err := requireEnv("TF_CLI_CONFIG_FILE")
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"PATH":               os.Getenv("PATH"),
		"HOME":               home,
		"TF_CLI_CONFIG_FILE": rc,
		"CHECKPOINT_DISABLE": "1",
	}, nil
}
