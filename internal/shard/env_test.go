package shard

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/conductor-tf/conductor-tf/test/harness"
)

// The package's tests run against a real kube-apiserver and etcd (envtest), started once in
// TestMain from KUBEBUILDER_ASSETS; without it they fail saying how to get it.

var (
	testCfg  *rest.Config
	testKube kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or with the environment of "+
			"`set -a; eval \"$(hack/tools.sh env)\"; set +a`")
		return 1
	}
	te := &envtest.Environment{BinaryAssetsDirectory: os.Getenv("KUBEBUILDER_ASSETS")}
	cfg, err := te.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the API server: %v\n", err)
		return 1
	}
	defer func() { _ = te.Stop() }()
	testCfg = cfg
	if testKube, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

var namespaces struct {
	sync.Mutex
	n int
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	namespaces.Lock()
	namespaces.n++
	name := fmt.Sprintf("shard-%d", namespaces.n)
	namespaces.Unlock()
	_, err := testKube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// newPartition proxies to the test API server (harness.Partition) and returns it and a client
// through it: a replica with that client loses the API server at Cut, its process still running.
func newPartition(t *testing.T) (*harness.Partition, kubernetes.Interface) {
	t.Helper()
	u, err := url.Parse(testCfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p, err := harness.StartPartition(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Cut)
	cfg := rest.CopyConfig(testCfg)
	cfg.Host = "https://" + p.Addr()
	cfg.Timeout = 2 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, kube
}
