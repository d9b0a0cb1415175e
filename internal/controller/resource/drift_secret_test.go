package resource

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// TestADriftCheckKeepsTheConnectionSecret: a reconcile woken for a drift check (every sync
// interval) also writes a missing connection Secret again and comes back within the Secret check
// interval. Before, the drift check's reconcile ended at the check and came back at the sync
// interval, when the next drift check was due: the Secret was never written again (the lifecycle
// spec "a connection Secret deleted by hand…" failed in CI on 7cfec13 this way).
func TestADriftCheckKeepsTheConnectionSecret(t *testing.T) {
	ref := &v1alpha1.SecretReference{Namespace: "default", Name: "db-conn"}
	r, runs, req := appliedResource(t, time.Hour, nil, func(res *v1alpha1.InfraResource) {
		res.Spec.WriteConnectionSecretToRef = ref
		res.Status.ConnectionSecret = ref.DeepCopy()
	})
	o := r.opts
	o.SecretCheckInterval = 7 * time.Second
	r = newReconciler(t, o) // the interval is the syncer's, built by New
	result, _ := reconcileAndGet(t, r, req)
	if runs.drifts != 1 {
		t.Fatalf("%d drift checks; want one (the sync interval passed)", runs.drifts)
	}
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &corev1.Secret{}); err != nil {
		t.Fatalf("the missing connection Secret was not written again after the drift check: %v", err)
	}
	if result.RequeueAfter <= 0 || result.RequeueAfter > 7*time.Second {
		t.Errorf("requeued after %s; want within the Secret check interval (7s)", result.RequeueAfter)
	}
}
