//go:build scale

package scale_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/test/harness"
)

// bench is what every benchmark of the package starts from: an API server with the CRDs, the
// namespaces, the module "one" (a random_pet), OpenTofu with the provider mirror, and the
// controller binary built.
type bench struct {
	dir    string
	env    *harness.Env
	k8s    client.WithWatch
	ctx    context.Context
	module string
	tofu   string
	tfEnv  map[string]string
	bin    string
}

// startBench starts the API server and builds the controller; stop stops the API server.
func startBench(t *testing.T) *bench {
	b := &bench{dir: t.TempDir(), ctx: context.Background(), tofu: os.Getenv("CONDUCTOR_TF_TOFU")}
	var err error
	if b.env, err = harness.Start(b.dir, harness.CRDDir()); err != nil {
		t.Fatal(err)
	}
	k8s, err := b.env.Client()
	if err != nil {
		t.Fatal(err)
	}
	if b.k8s, err = client.NewWithWatch(b.env.Config, client.Options{Scheme: k8s.Scheme()}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{stateNamespace, "bench", "baseline"} {
		if err := b.k8s.Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	b.module, _ = filepath.Abs(filepath.Join("..", "..", "internal", "tfrunner", "testdata", "modules", "one"))
	if b.tfEnv, err = harness.TerraformEnv(filepath.Join(b.dir, "home")); err != nil {
		t.Fatal(err)
	}
	b.tfEnv["TF_PLUGIN_CACHE_DIR"] = filepath.Join(b.dir, "plugin-cache")
	_ = os.MkdirAll(b.tfEnv["TF_PLUGIN_CACHE_DIR"], 0o700)
	if b.bin, err = harness.BuildController(b.dir); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bench) stop() { _ = b.env.Stop() }

// managerArgs are the manager's flags every benchmark runs it with: runs at once -concurrency,
// 16 reconciles, no resync within the run, no probes, errors only in its log.
func (b *bench) managerArgs() []string {
	return []string{"--namespace", stateNamespace, "--work-dir", filepath.Join(b.dir, "work"), "--terraform-path", b.tofu,
		"--max-concurrent-runs", fmt.Sprint(*concurrency), "--max-concurrent-reconciles", "16", "--sync-interval", "10h",
		"--health-probe-bind-address", "0", "--metrics-bind-address", "0", "--zap-devel=false", "--zap-log-level=error"}
}
