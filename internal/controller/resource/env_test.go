package resource

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
	"github.com/conductor-tf/conductor-tf/test/harness"
	"github.com/conductor-tf/conductor-tf/test/harness/apiserver"
)

// The package's envtest specs (env_*_test.go) run the resource controller, built by New, in a
// manager against a real kube-apiserver and etcd with the CRDs installed, started once in TestMain
// from KUBEBUILDER_ASSETS: finalizers, deletion, the status subresource and the cache are the API
// server's, not the fake client's. Runs are a fake that keeps state as a run would (stateRuns):
// these specs test the controller's decisions; whether runs work is test/lifecycle's.

var (
	envCfg    *rest.Config
	envKube   kubernetes.Interface
	envClient client.Client
	envScheme = runtime.NewScheme()
)

// envStateNamespace holds the state Secrets of the envtest specs.
const envStateNamespace = "conductor-system"

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "resource-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	env, err := apiserver.Start(dir, harness.CRDDir())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	ctrl.SetLogger(logr.Discard()) // what the specs see is the API's: objects, conditions, events
	_ = clientgoscheme.AddToScheme(envScheme)
	_ = v1alpha1.AddToScheme(envScheme)
	envCfg = env.Config
	if envKube, err = kubernetes.NewForConfig(envCfg); err == nil {
		envClient, err = client.New(envCfg, client.Options{Scheme: envScheme})
	}
	if err == nil {
		_, err = envKube.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: envStateNamespace}}, metav1.CreateOptions{})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// stateRuns is Runs that keeps state as a run through Terraform's kubernetes backend would: an
// apply writes a state of one more serial into the Secret the spec's backend names, a destroy one
// with no resources; it counts both.
type stateRuns struct {
	NoAdoption
	mu       sync.Mutex
	applies  map[string]int
	destroys map[string]int
}

func newStateRuns() *stateRuns {
	return &stateRuns{applies: map[string]int{}, destroys: map[string]int{}}
}

func (f *stateRuns) write(ctx context.Context, spec tfrunner.Spec, serial int, resources string) error {
	sfx := spec.Backend.Config["secret_suffix"].AsString()
	state := fmt.Sprintf(`{"version":4,"serial":%d,"lineage":"l-%s","resources":%s}`, serial, sfx, resources)
	return statebackend.NewStore(envKube, envStateNamespace).For(sfx).Write(ctx, []byte(state))
}

func (f *stateRuns) Apply(ctx context.Context, key string, spec tfrunner.Spec, _ tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error) {
	f.mu.Lock()
	f.applies[key]++
	n := f.applies[key]
	f.mu.Unlock()
	return &tfrunner.ApplyResult{Initialized: true, Plan: &tfjson.Plan{ID: "p"}}, f.write(ctx, spec, n,
		`[{"mode":"managed","type":"random_pet","name":"this","provider":"provider[\"registry.opentofu.org/hashicorp/random\"]","instances":[]}]`)
}

func (f *stateRuns) Destroy(ctx context.Context, key string, spec tfrunner.Spec) error {
	f.mu.Lock()
	f.destroys[key]++
	f.mu.Unlock()
	return f.write(ctx, spec, 1000, `[]`)
}

func (f *stateRuns) DriftCheck(context.Context, string, tfrunner.Spec) (*tfjson.StreamResult, error) {
	return &tfjson.StreamResult{Plan: &tfjson.Plan{ID: "check"}}, nil
}

func (f *stateRuns) counts(key string) (applies, destroys int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applies[key], f.destroys[key]
}

// startController runs the resource controller with runs in a manager of its own until the spec
// ends.
func startController(t *testing.T, runs Runs) {
	t.Helper()
	mgr, err := ctrl.NewManager(envCfg, ctrl.Options{Scheme: envScheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}}) // one manager per spec, one after another
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Kube: envKube, Recorder: mgr.GetEventRecorder("conductor-tf"),
		Runs: runs, State: statebackend.Config{Namespace: envStateNamespace}, SyncInterval: time.Hour, MaxConcurrentReconciles: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// waitFor polls cond every 100 ms until it holds or timeout passes, then fails t with what.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			list := &v1alpha1.InfraResourceList{}
			_ = envClient.List(context.Background(), list)
			for _, r := range list.Items {
				t.Logf("%s: phase %s, finalizers %v, deleting %v, conditions %+v", r.Name, r.Status.Phase, r.Finalizers, !r.DeletionTimestamp.IsZero(), r.Status.Conditions)
			}
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// getResource reads resource name; found false once it is gone.
func getResource(t *testing.T, name string) (*v1alpha1.InfraResource, bool) {
	t.Helper()
	res := &v1alpha1.InfraResource{}
	err := envClient.Get(context.Background(), client.ObjectKey{Name: name}, res)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return res, true
}
