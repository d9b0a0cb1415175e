package tfrunner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/conductor-tf/conductor-tf/internal/sandbox"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

var (
	env  *harness.Env
	kube kubernetes.Interface
	bins []tfrunner.Binary
)

func TestMain(m *testing.M) {
	sandbox.Enter() // confined runs of TestPoolConfined start here
	dir, err := os.MkdirTemp("", "tfrunner-")
	if err != nil {
		panic(err)
	}
	env, err = harness.Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kube = kubernetes.NewForConfigOrDie(env.Config)
	if bins, err = harness.Binaries(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// workspace opens a workspace for module (under testdata/modules) with state in a new namespace.
func workspace(t *testing.T, ctx context.Context, bin tfrunner.Binary, module, name string) (*tfrunner.Workspace, tfrunner.Spec, string) {
	t.Helper()
	tfEnv, err := harness.TerraformEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ns := strings.ToLower(fmt.Sprintf("%s-%s-%d", name, bin.Flavor, time.Now().UnixNano()%100000))
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs(filepath.Join("testdata", "modules", module))
	ws, err := tfrunner.NewWorkspace(t.TempDir(), bin, tfEnv, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	backend := statebackend.Config{Namespace: ns, KubeconfigPath: env.Kubeconfig}
	spec := tfrunner.Spec{
		Module:  tfrunner.Module{Source: src},
		Backend: tfrunner.Backend{Type: "kubernetes", Config: backend.Attributes(statebackend.SuffixFor(name), nil)},
	}
	return ws, spec, ns
}

// TestRealChain is the smoke test of the real chain: init, plan, apply, output and destroy of a
// small module with the mirror's random provider, state in a Secret of a real API server through
// Terraform's kubernetes backend. It runs once per available binary (OpenTofu, and Terraform when
// one is on PATH).
func TestRealChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	module, _ := filepath.Abs("testdata/modules/pet")

	for _, bin := range bins {
		t.Run(string(bin.Flavor), func(t *testing.T) {
			tfEnv, err := harness.TerraformEnv(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ns := "smoke-" + string(bin.Flavor)
			if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			suffix := statebackend.SuffixFor("pet-1")
			backend := statebackend.Config{Namespace: ns, KubeconfigPath: env.Kubeconfig}
			secretName := statebackend.SecretName(statebackend.DefaultWorkspace, suffix)

			ws, err := tfrunner.NewWorkspace(t.TempDir(), bin, tfEnv, 0)
			if err != nil {
				t.Fatal(err)
			}
			spec := tfrunner.Spec{
				Module:    tfrunner.Module{Source: module},
				Backend:   tfrunner.Backend{Type: "kubernetes", Config: backend.Attributes(suffix, nil)},
				Variables: map[string]any{"prefix": "smoke"},
			}
			needsInit, err := ws.Prepare(spec)
			if err != nil || !needsInit {
				t.Fatalf("first Prepare: needsInit=%v err=%v, want true, nil", needsInit, err)
			}
			if err := ws.Init(ctx); err != nil {
				t.Fatal(err)
			}
			if got := len(ws.Schema().Outputs); got != 2 {
				t.Fatalf("module outputs read after init: %d, want 2", got)
			}

			plan, err := ws.Plan(ctx, tfrunner.PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !plan.HasChanges || plan.Summary != (tfjson.Summary{Add: 2}) {
				t.Fatalf("first plan: changes=%v summary=%+v, want 2 to add", plan.HasChanges, plan.Summary)
			}
			if _, err := ws.Apply(ctx, plan, nil, nil); err != nil {
				t.Fatal(err)
			}

			secret, err := kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("state Secret %s after apply: %v", secretName, err)
			}
			if len(secret.Data["tfstate"]) == 0 {
				t.Fatalf("state Secret %s has no tfstate data: keys %v", secretName, keys(secret.Data))
			}

			outs, err := ws.Outputs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var name string
			if err := json.Unmarshal(outs["name"].Value, &name); err != nil || !strings.HasPrefix(name, "smoke-") {
				t.Fatalf("output name = %s (%v), want smoke-…", outs["name"].Value, err)
			}
			if outs["name"].Sensitive || !outs["password"].Sensitive {
				t.Fatalf("sensitivity: name=%v password=%v, want false, true", outs["name"].Sensitive, outs["password"].Sensitive)
			}

			// Unchanged inputs: no init, no changes.
			if needsInit, err := ws.Prepare(spec); err != nil || needsInit {
				t.Fatalf("second Prepare: needsInit=%v err=%v, want false, nil", needsInit, err)
			}
			if plan, err := ws.Plan(ctx, tfrunner.PlanOptions{}); err != nil || plan.HasChanges {
				t.Fatalf("second plan: %+v, %v; want no changes", plan, err)
			}

			if err := ws.Destroy(ctx); err != nil {
				t.Fatal(err)
			}
			if addrs, err := ws.StateAddresses(ctx); err != nil || len(addrs) != 0 {
				t.Fatalf("state after destroy: %v, %v; want empty", addrs, err)
			}
			if err := statebackend.NewStore(kube, ns).For(suffix).Delete(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := kube.CoreV1().Secrets(ns).Get(ctx, secretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("state Secret after delete: err=%v, want NotFound", err)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestLockedState takes the state lock as another client would (the backend's Lease, holder and
// lock info) and checks that a run fails with a *LockError carrying that lock's ID and holder,
// that the lock is not taken for ours, and that the run succeeds once it is released.
func TestLockedState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, bin := range bins {
		t.Run(string(bin.Flavor), func(t *testing.T) {
			ws, spec, ns := workspace(t, ctx, bin, "pet", "locked")
			spec.Variables = map[string]any{"prefix": "lock"}
			if _, err := ws.Prepare(spec); err != nil {
				t.Fatal(err)
			}
			if err := ws.Init(ctx); err != nil {
				t.Fatal(err)
			}
			suffix := statebackend.SuffixFor("locked")
			info := `{"ID":"held-by-ops","Operation":"OperationTypeApply","Who":"ops@laptop","Version":"1.12.6","Created":"2026-11-20T10:00:00Z","Path":""}`
			holder := "held-by-ops"
			// init created the backend's Lease, unheld; another client takes it.
			lease, err := kube.CoordinationV1().Leases(ns).Get(ctx, statebackend.LeaseName("default", suffix), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lease.Annotations = map[string]string{"app.terraform.io/lock-info": info}
			lease.Spec.HolderIdentity = &holder
			if _, err := kube.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}

			_, err = ws.Plan(ctx, tfrunner.PlanOptions{})
			var le *tfrunner.LockError
			if !errors.As(err, &le) || le.ID != "held-by-ops" || le.Who != "ops@laptop" {
				t.Fatalf("plan on a locked state: %v (%T), want *LockError with ID held-by-ops and holder ops@laptop", err, err)
			}
			lock, err := statebackend.NewStore(kube, ns).For(suffix).InspectLock(ctx)
			if err != nil || lock == nil || lock.ID != "held-by-ops" {
				t.Fatalf("InspectLock = %+v, %v", lock, err)
			}
			if statebackend.IsOwnStaleLock(lock, &statebackend.RunRecord{Who: statebackend.Who(), Started: time.Now().Add(-time.Hour)}, statebackend.Who()) {
				t.Fatal("someone else's lock taken for ours")
			}
			if err := statebackend.NewStore(kube, ns).For(suffix).ReleaseLock(ctx, lock.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := ws.Plan(ctx, tfrunner.PlanOptions{}); err != nil {
				t.Fatalf("plan after release: %v", err)
			}
		})
	}
}

// TestCancelReachesTerraform cancels an apply while it holds the state lock: Terraform gets
// SIGINT, stops, writes its state and releases the lock; nothing is left locked.
func TestCancelReachesTerraform(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, bin := range bins {
		t.Run(string(bin.Flavor), func(t *testing.T) {
			ws, spec, ns := workspace(t, ctx, bin, "slow", "slow")
			suffix := statebackend.SuffixFor("slow")
			if _, err := ws.Prepare(spec); err != nil {
				t.Fatal(err)
			}
			if err := ws.Init(ctx); err != nil {
				t.Fatal(err)
			}
			plan, err := ws.Plan(ctx, tfrunner.PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			started := time.Now()
			go func() { _, err := ws.Apply(runCtx, plan, nil, nil); done <- err }()

			// Wait until the apply holds the lock, then cancel it.
			deadline := time.Now().Add(time.Minute)
			for {
				lock, err := statebackend.NewStore(kube, ns).For(suffix).InspectLock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if lock != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the apply never took the lock")
				}
				time.Sleep(100 * time.Millisecond)
			}
			stop()
			err = <-done
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled apply returned %v, want context.Canceled", err)
			}
			if took := time.Since(started); took > 25*time.Second {
				t.Errorf("the cancelled apply took %s: SIGINT did not stop the provisioner's 20 s sleep", took)
			}
			lock, err := statebackend.NewStore(kube, ns).For(suffix).InspectLock(ctx)
			if err != nil || lock != nil {
				t.Fatalf("lock after a cancelled apply: %+v, %v; want none", lock, err)
			}
		})
	}
}
