package tfrunner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// TestGrantedKubeconfigLivesOnlyDuringTheRun runs a provisioner that reports what it sees of
// Kubernetes credentials: with Spec.Kubeconfig the run sees KUBECONFIG and KUBE_CONFIG_PATH naming
// a file with exactly those bytes, which is gone from the workspace once the run ends; without it,
// the next run of the same workspace sees neither (issue 18).
func TestGrantedKubeconfigLivesOnlyDuringTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tfEnv, err := harness.TerraformEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: bins[0], Dir: dir, Env: tfEnv, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs(filepath.Join("testdata", "modules", "credprobe"))
	out := filepath.Join(t.TempDir(), "seen")
	granted := []byte("apiVersion: v1\nkind: Config\n# a granted kubeconfig\n")
	spec := func(run string, kubeconfig []byte) tfrunner.Spec {
		return tfrunner.Spec{Module: tfrunner.Module{Source: src}, Kubeconfig: kubeconfig,
			Variables: map[string]any{"out": out, "run": run}}
	}

	if _, err := pool.Apply(ctx, "granted", spec("1", granted), tfrunner.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	seen, _ := os.ReadFile(out)
	path := filepath.Join(dir, "granted", "conductor.kubeconfig")
	want := "KUBECONFIG=" + path + "\nKUBE_CONFIG_PATH=" + path + "\n" + string(granted)
	if string(seen) != want {
		t.Fatalf("the run saw\n%s\nwant\n%s", seen, want)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the granted kubeconfig outlived the run: %v", err)
	}

	if _, err := pool.Apply(ctx, "granted", spec("2", nil), tfrunner.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	seen, _ = os.ReadFile(out)
	if string(seen) != "KUBECONFIG=\nKUBE_CONFIG_PATH=\n" {
		t.Fatalf("a run granted nothing saw\n%s", seen)
	}
	if strings.Contains(string(seen), "granted") {
		t.Fatal("a later run saw an earlier run's credentials")
	}
}
