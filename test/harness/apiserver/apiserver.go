// Package apiserver starts the one API server every envtest-based suite of the repository runs
// against (etcd and kube-apiserver from KUBEBUILDER_ASSETS, which hack/tools.sh builds), with a
// cluster-admin kubeconfig file for clients outside the test process, and holds the helpers those
// suites share. It imports nothing of the module, so that the packages test/harness itself
// imports (internal/statebackend, through internal/tfrunner) can use it in their own tests.
package apiserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running API server: Config for clients in the test process, Kubeconfig (a file) for
// clients outside it (Terraform's kubernetes backend and provider, a controller binary).
type Env struct {
	*envtest.Environment
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for a cluster-admin user.
	Kubeconfig string
}

// Start starts etcd and kube-apiserver with the CRDs in crdDirs installed (each must exist), and
// writes an admin kubeconfig into dir. Errors: KUBEBUILDER_ASSETS unset (the message says to run
// through make), or the binaries' start. Stop it with Env.Stop.
func Start(dir string, crdDirs ...string) (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or with the environment of " +
			"`set -a; eval \"$(hack/tools.sh env)\"; set +a`")
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

// TB is what the helpers need of a test: *testing.T and Ginkgo's GinkgoT() both are one.
type TB interface {
	Helper()
	Fatal(args ...any)
}

// NewNamespace creates a namespace named prefix and 5 random characters (GenerateName) and returns
// its name; an error fails t.
func NewNamespace(t TB, kube kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// FreeAddr is a loopback address (127.0.0.1:port) no listener holds at the moment it returns.
// Another process may take it before the caller listens; the suites accept that race.
func FreeAddr(t TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
