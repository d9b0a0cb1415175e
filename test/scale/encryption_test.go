//go:build scale

package scale_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// TestBenchEncryption (make bench-encryption) measures what state and plan encryption costs: N
// claims of one class to Ready through the controller without encryption, then N more (after the
// first N are reclaimed) with --state-encryption-secret, with the same binary, module, provider
// mirror and concurrency, in one run; it prints both times, their ratio, and the CPU per claim of
// each (every run derives its keys with PBKDF2, statebackend.KeyIterations).
func TestBenchEncryption(t *testing.T) {
	b := startBench(t)
	defer b.stop()
	ctx, k8s := b.ctx, b.k8s
	class := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: "pets"},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: "Pet", Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module:    v1alpha1.ModuleSource{Source: b.module, Version: "v1"},
			Variables: v1alpha1.Variables{"prefix": {Raw: []byte(`"${claim.name}"`)}}},
	}
	if err := k8s.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	type result struct {
		took time.Duration
		cpu  string
	}
	results := map[bool]result{}
	for _, encrypted := range []bool{false, true} {
		args := b.managerArgs()
		ns := "plain"
		if encrypted {
			args, ns = append(args, "--state-encryption-secret", "conductor-tf-state-key"), "encrypted"
		}
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		ctl, err := b.env.StartController(b.bin, filepath.Join(b.dir, "controller-"+ns+".log"), b.tfEnv, args...)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 2*time.Minute, func() bool {
			got := &v1alpha1.InfraClass{}
			return k8s.Get(ctx, client.ObjectKeyFromObject(class), got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady)
		})
		cpuBefore := cpuSeconds()
		start := time.Now()
		petClaimsToReady(t, ctx, k8s, ns, *n)
		results[encrypted] = result{took: time.Since(start), cpu: cpuRows(cpuBefore, cpuSeconds(), *n)}
		if encrypted {
			checkEncrypted(t, b)
		}
		massDeletion(t, ctx, k8s, ns, "Pet", *n)
		ctl.Stop()
	}
	plain, enc := results[false], results[true]
	fmt.Printf("\nbench-encryption: N=%d claims, concurrency %d, module with one random_pet, runs in %s, plain first\n", *n, *concurrency, filepath.Base(b.tofu))
	fmt.Printf("| measure | value |\n|---|---|\n")
	fmt.Printf("| %d claims to Ready, states not encrypted | %.1f s |\n", *n, plain.took.Seconds())
	fmt.Printf("| %d claims to Ready, states and plans encrypted | %.1f s |\n", *n, enc.took.Seconds())
	fmt.Printf("| encrypted / not encrypted | %.2f× |\n", enc.took.Seconds()/plain.took.Seconds())
	fmt.Printf("\nCPU per claim, not encrypted: %s\nCPU per claim, encrypted: %s\n", plain.cpu, enc.cpu)
}

// checkEncrypted fails the benchmark unless a state written by the encrypted round is encrypted
// (a comparison with encryption silently off would measure nothing): a store without the key
// cannot read it.
func checkEncrypted(t *testing.T, b *bench) {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(b.env.Config)
	list, err := kube.CoreV1().Secrets(stateNamespace).List(b.ctx, metav1.ListOptions{LabelSelector: "tfstate=true"})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("state Secrets: %d, %v", len(list.Items), err)
	}
	sfx := list.Items[0].Labels["tfstateSecretSuffix"]
	if _, _, err := statebackend.NewStore(kube, stateNamespace).For(sfx).Read(b.ctx); !errors.Is(err, statebackend.ErrNoStateKey) {
		t.Fatalf("the encrypted round's state %s reads without the key (%v): it is not encrypted", list.Items[0].Name, err)
	}
}
