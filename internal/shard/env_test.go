package shard

import (
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/conductor-tf/conductor-tf/test/harness"
	"github.com/conductor-tf/conductor-tf/test/harness/apiserver"
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
	dir, err := os.MkdirTemp("", "shard-test-")
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
	testCfg = env.Config
	if testKube, err = kubernetes.NewForConfig(testCfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T) string { return apiserver.NewNamespace(t, testKube, "shard-") }

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
