package tfrunner_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// TestRealChain is the smoke test of the real chain: init, plan, apply, output and destroy of a
// small module with the mirror's random provider, state in a Secret of a real API server through
// Terraform's kubernetes backend. It runs once per available binary (OpenTofu, and Terraform when
// one is on PATH).
func TestRealChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env, err := harness.Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	bins, err := harness.Binaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
			if !plan.HasChanges || plan.Summary != (tfrunner.Summary{Add: 2}) {
				t.Fatalf("first plan: changes=%v summary=%+v, want 2 to add", plan.HasChanges, plan.Summary)
			}
			if err := ws.Apply(ctx, plan); err != nil {
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
			if err := statebackend.Delete(ctx, kube, ns, statebackend.DefaultWorkspace, suffix); err != nil {
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
