package tfrunner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conductor-tf/conductor-tf/internal/sandbox"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// confinedPool is a pool of real tofu whose runs are confined as the manager confines them: the
// work directory hidden, the binary and the CLI configuration trusted. It returns the pool, its
// runs directory and a spec maker for the one-random_pet module.
func confinedPool(t *testing.T, confine bool) (*tfrunner.Pool, string, func(key string) tfrunner.Spec) {
	t.Helper()
	// A deep work directory, as tests make: TMPDIRs beside the workspaces would not fit a socket's
	// path, so they go to the system's temporary directory (socketDir).
	work := filepath.Join(t.TempDir(), strings.Repeat("w", 60))
	tfEnv, err := harness.TerraformEnv(filepath.Join(work, "home"))
	if err != nil {
		t.Fatal(err)
	}
	delete(tfEnv, "HOME")
	tfEnv["TF_PLUGIN_CACHE_DIR"] = filepath.Join(work, "plugin-cache")
	if err := os.MkdirAll(tfEnv["TF_PLUGIN_CACHE_DIR"], 0o700); err != nil {
		t.Fatal(err)
	}
	bin := bins[0]
	if confine {
		if sandbox.ABI() < 1 {
			t.Skip("the kernel has no Landlock")
		}
		rc := tfEnv["TF_CLI_CONFIG_FILE"]
		mirror := os.Getenv("CONDUCTOR_TF_PROVIDER_MIRROR")
		if bin.Sandbox, err = sandbox.New(sandbox.Access{Trusted: []string{bin.Path, rc, mirror}}, []string{work, env.Kubeconfig}); err != nil {
			t.Fatal(err)
		}
	}
	runs := filepath.Join(work, "runs")
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: bin, Dir: runs, Env: tfEnv, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs("testdata/modules/one")
	spec := func(key string) tfrunner.Spec {
		// The local backend (state in the workspace): one backend block for every key, as the
		// state server's http backend has, so that every key shares one init.
		return tfrunner.Spec{Module: tfrunner.Module{Source: src}, Backend: tfrunner.Backend{Type: "local"}, Variables: map[string]any{"prefix": key}}
	}
	return pool, runs, spec
}

// TestPoolConfinedRunsApply: real tofu and a real provider plan and apply inside the allow-list
// (the shared init and plugin cache read-only, only the workspace writable), and their HOME and
// TMPDIR are the workspace's own, short enough for the provider's socket whatever the key's length
// (a resource's name runs to 253 characters).
func TestPoolConfinedRunsApply(t *testing.T) {
	pool, runs, spec := confinedPool(t, true)
	ctx := context.Background()
	for _, key := range []string{"confined-a", "confined-" + strings.Repeat("b", 200)} {
		res, err := pool.Apply(ctx, key, spec(key), tfrunner.ApplyOptions{})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if !res.Applied || !strings.Contains(string(res.Outputs["name"].Value), key) {
			t.Fatalf("%s: applied %v, outputs %v", key, res.Applied, res.Outputs)
		}
		if _, err := os.Stat(filepath.Join(runs, key, ".conductor", "home")); err != nil {
			t.Errorf("%s: no HOME of its own: %v", key, err)
		}
	}
	// Issue 65 items 1 and 7: a run's variables do not outlive it, and the shared init, which runs
	// of every class naming the module read, holds no resource's values. Before, the shared
	// directory kept the first run's conductor.tfvars.json, and each workspace its own.
	shared, _ := filepath.Glob(filepath.Join(runs, wsfs.SharedDirName, "*", "*"))
	for _, f := range shared {
		if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), "confined-a") {
			t.Errorf("the shared init's %s holds a resource's value: %s", filepath.Base(f), data)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(runs, "*", "conductor.tfvars.json")); len(left) > 0 {
		t.Errorf("variables files left after their runs ended: %v", left)
	}
}

// TestPoolRefusesASharedInitChangedAfterInit: a file of a module version's shared init changed
// after init (here its lock file, which a run's plan trusts) is refused before anything runs, with
// a message saying so; the next run initialises the module version again and applies.
func TestPoolRefusesASharedInitChangedAfterInit(t *testing.T) {
	pool, runs, spec := confinedPool(t, false)
	ctx := context.Background()
	if _, err := pool.Apply(ctx, "tamper-a", spec("tamper-a"), tfrunner.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	locks, _ := filepath.Glob(filepath.Join(runs, wsfs.SharedDirName, "*", ".terraform.lock.hcl"))
	if len(locks) != 1 {
		t.Fatalf("shared inits' lock files: %v", locks)
	}
	f, err := os.OpenFile(locks[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("\n# planted\n")
	_ = f.Close()
	_, err = pool.Apply(ctx, "tamper-b", spec("tamper-b"), tfrunner.ApplyOptions{})
	var runErr *tfrunner.RunError
	if !errors.As(err, &runErr) || !strings.Contains(runErr.Message, "changed after init") {
		t.Fatalf("a run over the changed shared init: %v; want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(runs, "tamper-b", "terraform.tfstate")); err == nil {
		t.Error("the refused run applied")
	}
	if _, err := pool.Apply(ctx, "tamper-b", spec("tamper-b"), tfrunner.ApplyOptions{}); err != nil {
		t.Fatalf("the next run, over a new init: %v", err)
	}
	data, _ := os.ReadFile(locks[0])
	if strings.Contains(string(data), "planted") {
		t.Error("the next run used the changed lock file")
	}
}
