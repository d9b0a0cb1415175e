package statebackend

import (
	"context"
	"fmt"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestProbeChunks (throwaway) shows what terraform's kubernetes backend writes for a big state.
func TestProbeChunks(t *testing.T) {
	if os.Getenv("PROBE") == "" {
		t.Skip("probe")
	}
	ns := newNamespace(t)
	dir := writeModule(t, fmt.Sprintf(`
terraform {
  backend "kubernetes" {
    secret_suffix = "big"
    namespace     = %q
    config_path   = %q
    labels        = { "extra.example/x" = "y" }
  }
}
resource "random_bytes" "big" {
  length = 1500000
}
`, ns, testKubeconfig))
	tf := binaries(t)[1].path
	mustTF(t, tf, dir, nil, "init", "-input=false")
	mustTF(t, tf, dir, nil, "apply", "-auto-approve", "-input=false")
	list, err := testKube.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		keys := map[string]int{}
		for k, v := range s.Data {
			keys[k] = len(v)
		}
		t.Logf("secret %s type=%s labels=%v annotations=%v data=%v", s.Name, s.Type, s.Labels, s.Annotations, keys)
	}
	leases, _ := testKube.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{})
	for _, l := range leases.Items {
		t.Logf("lease %s labels=%v annotations=%v holder=%v", l.Name, l.Labels, l.Annotations, l.Spec.HolderIdentity)
	}
}
