package tfrunner_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/warm"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// TestPoolReattachesWarmProviders: runs of one tenant and module, one after another, are served by
// one random provider process that real tofu reattaches to, each applying its own resource;
// another tenant's run gets a process of its own.
func TestPoolReattachesWarmProviders(t *testing.T) {
	ctx := context.Background()
	tfEnv, err := harness.TerraformEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tfEnv["TF_PLUGIN_CACHE_DIR"] = t.TempDir()
	dir := t.TempDir()
	warm := warm.New(filepath.Join(dir, "runs", ".warm"))
	warm.Providers = []string{"hashicorp/random"}
	defer warm.Close()
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: bins[0], Dir: filepath.Join(dir, "runs"), Env: tfEnv, MaxConcurrent: 1, WarmProviders: warm})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs("testdata/modules/one")
	apply := func(key, tenant string, cold ...bool) {
		spec := tfrunner.Spec{
			Tenant: tenant, Module: tfrunner.Module{Source: src}, ColdProviders: len(cold) > 0 && cold[0],
			Backend: tfrunner.Backend{Type: "kubernetes", Config: statebackend.Config{Namespace: "default", KubeconfigPath: env.Kubeconfig}.
				Attributes(statebackend.SuffixFor(key), nil)},
			Variables: map[string]any{"prefix": key},
		}
		res, err := pool.Apply(ctx, key, spec, tfrunner.ApplyOptions{})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !res.Applied || !strings.Contains(string(res.Outputs["name"].Value), key) {
			t.Fatalf("%s: applied %v, outputs %v", key, res.Applied, res.Outputs)
		}
	}
	for i := range 3 {
		apply(fmt.Sprintf("warm-a-%d", i), "team-a")
	}
	if n := warm.Started(); n != 1 {
		t.Errorf("three runs of one tenant started %d provider processes, want 1", n)
	}
	apply("warm-b-0", "team-b")
	if n := warm.Started(); n != 2 {
		t.Errorf("another tenant's run: %d provider processes started, want 2", n)
	}
	// A class with warmProviders: Disabled: its run starts its own provider.
	apply("cold-a-0", "team-a", true)
	if n := warm.Started(); n != 2 {
		t.Errorf("a run with ColdProviders: %d provider processes started, want still 2", n)
	}
}
