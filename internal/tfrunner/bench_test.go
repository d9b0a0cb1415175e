package tfrunner_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// benchWorkspace is a pre-initialised workspace of the one-resource module with state in the API
// server (Terraform's kubernetes backend, for the controller's run and the baseline alike).
func benchWorkspace(b *testing.B, name string) (*tfrunner.Workspace, tfrunner.Spec) {
	ctx := context.Background()
	tfEnv, err := harness.TerraformEnv(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	src, _ := filepath.Abs("testdata/modules/one")
	ws, err := tfrunner.NewWorkspace(b.TempDir(), bins[0], tfEnv, 0)
	if err != nil {
		b.Fatal(err)
	}
	spec := tfrunner.Spec{
		Module: tfrunner.Module{Source: src},
		Backend: tfrunner.Backend{Type: "kubernetes", Config: statebackend.Config{Namespace: "default", KubeconfigPath: env.Kubeconfig}.
			Attributes(statebackend.SuffixFor(name), nil)},
		Variables: map[string]any{"prefix": "bench"},
	}
	if _, err := ws.Prepare(spec); err != nil {
		b.Fatal(err)
	}
	if err := ws.Init(ctx); err != nil {
		b.Fatal(err)
	}
	return ws, spec
}

// BenchmarkBareApply is the baseline: `apply -auto-approve` run directly in a pre-initialised
// directory, each iteration changing a variable so that there is something to apply (a replace).
// Compare with BenchmarkWorkspaceApply in one run:
//
//	go test ./internal/tfrunner -run '^$' -bench 'Apply$' -count 6 | benchstat -col /name -
func BenchmarkBareApply(b *testing.B) {
	ws, _ := benchWorkspace(b, "bench-bare")
	tfEnv, _ := harness.TerraformEnv(b.TempDir())
	var envList []string
	for k, v := range tfEnv {
		envList = append(envList, k+"="+v)
	}
	i := 0
	for b.Loop() {
		i++
		cmd := exec.Command(ws.Binary().Path, "apply", "-auto-approve", "-input=false", "-no-color",
			"-var-file=conductor.tfvars.json", fmt.Sprintf("-var=prefix=bench%d", i))
		cmd.Dir, cmd.Env = ws.Dir(), envList
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
	}
}

// BenchmarkWorkspaceApply is one run as the controller makes it, through tfrunner in a
// pre-initialised workspace, for the same change as BenchmarkBareApply: write the root module and
// variables, then one apply -auto-approve -json whose stream gives plan, summaries and outputs.
func BenchmarkWorkspaceApply(b *testing.B) {
	ws, spec := benchWorkspace(b, "bench-ws")
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		spec.Variables = map[string]any{"prefix": fmt.Sprintf("bench%d", i)}
		if needsInit, err := ws.Prepare(spec); err != nil || needsInit {
			b.Fatalf("prepare: init=%v %v", needsInit, err)
		}
		res, err := ws.ApplyJSON(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if !res.Plan.HasChanges || len(res.Outputs) != 1 {
			b.Fatalf("run: %s", res)
		}
	}
}

// BenchmarkPoolApply provisions N resources of one module through a Pool (init included, as for
// new resources) and reports resources per second.
func BenchmarkPoolApply(b *testing.B) {
	const n = 8
	tfEnv, err := harness.TerraformEnv(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	tfEnv["TF_PLUGIN_CACHE_DIR"] = b.TempDir()
	src, _ := filepath.Abs("testdata/modules/pet")
	ctx := context.Background()
	round := 0
	var total time.Duration
	for b.Loop() {
		round++
		pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: bins[0], Dir: filepath.Join(b.TempDir(), "runs"), Env: tfEnv, MaxConcurrent: 2})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			key := fmt.Sprintf("pool-%d-%d", round, i)
			spec := tfrunner.Spec{
				Module: tfrunner.Module{Source: src},
				Backend: tfrunner.Backend{Type: "kubernetes", Config: statebackend.Config{Namespace: "default", KubeconfigPath: env.Kubeconfig}.
					Attributes(statebackend.SuffixFor(key), nil)},
				Variables: map[string]any{"prefix": key},
			}
			go func() {
				_, err := pool.Apply(ctx, key, spec, tfrunner.ApplyOptions{})
				errs <- err
			}()
		}
		for i := 0; i < n; i++ {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(n*round)/total.Seconds(), "resources/s")
}
