// Package harness starts the real parts tests run against: an API server and etcd (envtest, with
// the binaries hack/tools.sh builds, found through KUBEBUILDER_ASSETS), the Terraform/OpenTofu
// binaries, and the provider mirror (TF_CLI_CONFIG_FILE). `make test` sets those variables; a test
// run without them fails with a message saying so rather than skipping.
package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness/apiserver"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// CRDDir is where controller-gen writes the CRDs.
func CRDDir() string { return filepath.Join(RepoRoot(), "config", "crd", "bases") }

// FixtureCRDDir holds CRDs the modules need that the local control plane lacks (Rook's MinIO
// ObjectStore).
func FixtureCRDDir() string { return filepath.Join(RepoRoot(), "test", "fixtures", "crds") }

// requireEnv returns the variable's value or an error that says to run through make.
func requireEnv(name string) (string, error) {
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s is not set: run the tests with `make test`, which builds the tools and sets it", name)
	}
	return v, nil
}

// Env is a running API server (apiserver.Env) and, once started, a kube-controller-manager.
type Env struct {
	*apiserver.Env

	kcm *exec.Cmd
}

// StartControllerManager runs kube-controller-manager (from KUBEBUILDER_ASSETS) against the
// environment with the namespace controller, the garbage collector and the resource quota
// controller, so that deleting a namespace or an owner really removes what it holds and a
// ResourceQuota is enforced, as on a cluster. Env.Stop stops it.
func (e *Env) StartControllerManager(logDir string) error {
	log, err := os.Create(filepath.Join(logDir, "kube-controller-manager.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(e.BinaryAssetsDirectory, "kube-controller-manager"),
		"--kubeconfig", e.Kubeconfig, "--controllers", "namespace,garbagecollector,resourcequota",
		"--secure-port", "0", "--leader-elect=false", "--use-service-account-credentials=false")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	e.kcm = cmd
	return nil
}

// Stop stops the controller manager, if started, and the API server and etcd.
func (e *Env) Stop() error {
	if e.kcm != nil && e.kcm.Process != nil {
		_ = e.kcm.Process.Signal(os.Interrupt)
		_ = e.kcm.Wait()
	}
	return e.Environment.Stop()
}

// Start starts etcd and kube-apiserver with the CRDs in crdDirs installed, and writes an admin
// kubeconfig into dir (apiserver.Start). Stop it with Env.Stop.
func Start(dir string, crdDirs ...string) (*Env, error) {
	env, err := apiserver.Start(dir, crdDirs...)
	if err != nil {
		return nil, err
	}
	return &Env{Env: env}, nil
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

// SamplesRemote is the module repository the samples name; tests and the demo replace it with a
// local git repository made by hack/publish-modules.sh.
const SamplesRemote = "git::https://github.com/conductor-tf/conductor-tf.git"

// ModulesVersion is the tag the samples pin their modules at.
const ModulesVersion = "v0.1.0"

// PublishModules makes dir a git repository of the repository's modules/ tagged ModulesVersion and
// returns the git::file:// URL that stands in for SamplesRemote.
func PublishModules(dir string) (string, error) {
	out, err := exec.Command(filepath.Join(RepoRoot(), "hack", "publish-modules.sh"), dir, ModulesVersion).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("publishing modules: %v\n%s", err, out)
	}
	return "git::file://" + dir, nil
}

// Samples are the objects in config/samples.
type Samples struct {
	Classes   []v1alpha1.InfraClass
	Claims    []v1alpha1.InfraClaim
	Resources []v1alpha1.InfraResource
}

// LoadSamples reads every InfraClass, InfraClaim and InfraResource in config/samples. With
// modulesURL set, module sources in SamplesRemote are rewritten to it (see PublishModules).
func LoadSamples(modulesURL string) (*Samples, error) {
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "config", "samples", "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := &Samples{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if modulesURL != "" {
			data = bytes.ReplaceAll(data, []byte(SamplesRemote), []byte(modulesURL))
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			var meta struct{ Kind string }
			if err := json.Unmarshal(raw, &meta); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			var target any
			switch meta.Kind {
			case "InfraClass":
				out.Classes = append(out.Classes, v1alpha1.InfraClass{})
				target = &out.Classes[len(out.Classes)-1]
			case "InfraClaim":
				out.Claims = append(out.Claims, v1alpha1.InfraClaim{})
				target = &out.Claims[len(out.Claims)-1]
			case "InfraResource":
				out.Resources = append(out.Resources, v1alpha1.InfraResource{})
				target = &out.Resources[len(out.Resources)-1]
			default:
				continue
			}
			if err := json.Unmarshal(raw, target); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	return out, nil
}

// ClassAndClaim returns copies of the sample class named class and the sample claim named claim;
// the error names the one that is missing.
func (s *Samples) ClassAndClaim(class, claim string) (*v1alpha1.InfraClass, *v1alpha1.InfraClaim, error) {
	var cl *v1alpha1.InfraClass
	var c *v1alpha1.InfraClaim
	for i := range s.Classes {
		if s.Classes[i].Name == class {
			cl = s.Classes[i].DeepCopy()
		}
	}
	for i := range s.Claims {
		if s.Claims[i].Name == claim {
			c = s.Claims[i].DeepCopy()
		}
	}
	switch {
	case cl == nil:
		return nil, nil, fmt.Errorf("no sample class %s in config/samples", class)
	case c == nil:
		return nil, nil, fmt.Errorf("no sample claim %s in config/samples", claim)
	}
	return cl, c, nil
}
