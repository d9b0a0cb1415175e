package shard

import (
	"context"
	"fmt"
	"io"
	"net"
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

// partition is a TCP proxy to the API server that can be cut: a replica whose client goes through
// it loses the API server as a network partition would, its process still running.
type partition struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

// newPartition proxies to the test API server and returns a client through it.
func newPartition(t *testing.T) (*partition, kubernetes.Interface) {
	t.Helper()
	u, err := url.Parse(testCfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partition{ln: ln}
	go p.serve(u.Host)
	t.Cleanup(p.Cut)
	cfg := rest.CopyConfig(testCfg)
	cfg.Host = "https://" + ln.Addr().String()
	cfg.Timeout = 2 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, kube
}

func (p *partition) serve(target string) {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

// Cut closes the proxy and every connection through it.
func (p *partition) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
