//go:build scale

package scale_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

var discoverN = flag.Int("discover", 1000, "ConfigMaps made outside that bench-discovery lists into resources")

// TestBenchDiscovery measures, in one run (make bench-discovery; figures, not pass/fail), a class's
// discovery of -discover ConfigMaps made outside the controller, through the real manager and the
// real kubernetes provider: from the class's creation to every candidate an Available resource,
// beside the bare listing (tofu apply of the same discovery module in a directory, state local,
// after an untimed init), and their ratio; then a tenth of the ConfigMaps deleted, to every one of
// their resources Lost. It fails only when the counts are not reached.
func TestBenchDiscovery(t *testing.T) {
	b := startBench(t)
	defer b.stop()
	const found, sa = "found", "bench-discovery"
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: found}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: stateNamespace, Name: sa}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: sa},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: stateNamespace, Name: sa}}},
	} {
		if err := b.k8s.Create(b.ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	parallel(*discoverN, 16, func(i int) error {
		return b.k8s.Create(b.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: found, Name: fmt.Sprintf("cm-%04d", i),
			Labels: map[string]string{"discover": "me"}}, Data: map[string]string{"owner": fmt.Sprintf("team-%d", i%7)}})
	})
	t.Logf("made %d ConfigMaps outside in %s", *discoverN, time.Since(start).Round(time.Millisecond))

	modules, _ := filepath.Abs(filepath.Join("..", "lifecycle", "testdata", "modules"))
	listing := filepath.Join(modules, "discover-configmaps")
	bare := bareListing(t, b, listing, found)

	ctl, err := b.env.StartController(b.bin, filepath.Join(b.dir, "controller.log"), b.tfEnv, b.managerArgs()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Stop()
	class := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: "configmaps"},
		Spec: v1alpha1.InfraClassSpec{
			ResourceKind: "Settings",
			Module:       v1alpha1.ModuleSource{Source: filepath.Join(modules, "configmap"), Version: "v1"},
			Variables:    v1alpha1.Variables{"name": {Raw: []byte(`"${claim.name}"`)}, "namespace": {Raw: []byte(`"${claim.namespace}"`)}},
			RunInputs:    v1alpha1.RunInputs{KubernetesAccess: &v1alpha1.KubernetesAccess{ServiceAccountName: sa}},
			Discovery: &v1alpha1.ClassDiscovery{
				Module:    v1alpha1.ModuleSource{Source: listing, Version: "v1"},
				Variables: v1alpha1.Variables{"namespace": {Raw: []byte(`"` + found + `"`)}, "selector": {Raw: []byte(`"discover=me"`)}},
				Interval:  &v1alpha1.Duration{Duration: 20 * time.Second},
			},
		},
	}
	count := func(phase v1alpha1.ResourcePhase) int {
		list := &v1alpha1.InfraResourceList{}
		if err := b.k8s.List(b.ctx, list, client.MatchingLabels{v1alpha1.LabelDiscoveredBy: class.Name}); err != nil {
			return -1
		}
		n := 0
		for _, r := range list.Items {
			if r.Status.Phase == phase {
				n++
			}
		}
		return n
	}
	start = time.Now()
	if err := b.k8s.Create(b.ctx, class); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Minute, func() bool { return count(v1alpha1.ResourceAvailable) == *discoverN })
	ours := time.Since(start)

	gone := *discoverN / 10
	start = time.Now()
	parallel(gone, 16, func(i int) error {
		return b.k8s.Delete(b.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: found, Name: fmt.Sprintf("cm-%04d", i)}})
	})
	waitFor(t, 10*time.Minute, func() bool { return count(v1alpha1.ResourceLost) == gone })
	lost := time.Since(start)

	t.Logf("| discovery of %d ConfigMaps | seconds | per object |", *discoverN)
	t.Logf("|---|---|---|")
	t.Logf("| bare listing (tofu apply of the discovery module, after init) | %.1f | %.2f ms |", bare.Seconds(), ms(bare, *discoverN))
	t.Logf("| class created → %d Available resources (manager, listing resource, discovery reconciler) | %.1f | %.2f ms |", *discoverN, ours.Seconds(), ms(ours, *discoverN))
	t.Logf("| ratio ours / bare listing | %.2f | |", ours.Seconds()/bare.Seconds())
	t.Logf("| %d deleted outside → %d Lost (interval 20s: up to one interval's wait) | %.1f | |", gone, gone, lost.Seconds())
}

func ms(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }

// bareListing times tofu apply of the discovery module alone (state local, the API server's admin
// kubeconfig), after an untimed init, and checks it listed every ConfigMap.
func bareListing(t *testing.T, b *bench, module, ns string) time.Duration {
	dir := filepath.Join(b.dir, "bare-listing")
	root, _ := json.Marshal(map[string]any{
		"module": map[string]any{"main": map[string]any{"source": module, "namespace": ns, "selector": "discover=me"}},
		"output": map[string]any{"count": map[string]any{"value": "${length(module.main.candidates)}"}},
	})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf.json"), root, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBE_CONFIG_PATH=" + b.env.Kubeconfig}
	for k, v := range b.tfEnv {
		env = append(env, k+"="+v)
	}
	run := func(args ...string) string {
		cmd := exec.Command(b.tofu, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tofu %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("init", "-input=false", "-no-color")
	start := time.Now()
	run("apply", "-auto-approve", "-input=false", "-no-color")
	took := time.Since(start)
	if got := run("output", "-raw", "count"); got != fmt.Sprint(*discoverN) {
		t.Fatalf("the bare listing found %s ConfigMaps, want %d", got, *discoverN)
	}
	return took
}
