package resource

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// statusScope opens a scope of resource name as a reconcile does (the resource read, base its copy).
func statusScope(t *testing.T, c client.Client, name string) *resourceScope {
	t.Helper()
	res := &v1alpha1.InfraResource{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: name}, res); err != nil {
		t.Fatal(err)
	}
	return &resourceScope{c: c, reader: c, res: res, base: res.DeepCopy()}
}

// A status write is conditioned on the status this reconcile read: a reconcile whose view is stale
// (another replica took the resource's share and wrote its status meanwhile) fails with a conflict
// and overwrites nothing, while a change of other fields only (an annotation) does not make a
// run's record fail. Before, the status was a merge patch without resourceVersion, and the stale
// reconcile's last write replaced the newer lastRun.
func TestStatusWriteNeverReplacesANewerStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	res := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Status: v1alpha1.InfraResourceStatus{LastRun: &v1alpha1.RunStatus{ID: "run-0", Result: v1alpha1.RunSucceeded}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.InfraResource{}).WithObjects(res).Build()
	ctx := context.Background()

	stale, fresh := statusScope(t, c, "db"), statusScope(t, c, "db")
	fresh.res.Status.LastRun = &v1alpha1.RunStatus{ID: "run-new", Result: v1alpha1.RunRunning}
	if err := fresh.patch(ctx); err != nil {
		t.Fatal(err)
	}
	stale.res.Status.LastRun = &v1alpha1.RunStatus{ID: "run-old", Result: v1alpha1.RunFailed}
	if err := stale.patch(ctx); !apierrors.IsConflict(err) {
		t.Fatalf("a stale reconcile's status write: %v, want a conflict", err)
	}
	got := &v1alpha1.InfraResource{}
	if err := c.Get(ctx, types.NamespacedName{Name: "db"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.LastRun.ID != "run-new" {
		t.Fatalf("lastRun %s after the stale write, want run-new kept", got.Status.LastRun.ID)
	}

	// Another field changed (an annotation): the status is still what the reconcile read, so its
	// write goes through on the new resourceVersion.
	s := statusScope(t, c, "db")
	annotated := got.DeepCopy()
	annotated.Annotations = map[string]string{"example.com/owner": "team-a"}
	if err := c.Update(ctx, annotated); err != nil {
		t.Fatal(err)
	}
	s.res.Status.LastRun = &v1alpha1.RunStatus{ID: "run-new", Result: v1alpha1.RunSucceeded}
	if err := s.patch(ctx); err != nil {
		t.Fatalf("a status write after an annotation changed: %v, want it written", err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "db"}, got); err != nil || got.Status.LastRun.Result != v1alpha1.RunSucceeded {
		t.Fatalf("lastRun %+v, %v; want the run's outcome written", got.Status.LastRun, err)
	}

	// A reconcile whose bucket was lost writes nothing at all, not even at close.
	lost := make(chan struct{})
	close(lost)
	s = statusScope(t, c, "db")
	s.lost = lost
	s.res.Status.LastRun = &v1alpha1.RunStatus{ID: "run-lost", Result: v1alpha1.RunFailed}
	if err := s.close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "db"}, got); err != nil || got.Status.LastRun.ID != "run-new" {
		t.Fatalf("lastRun %+v, %v after a lost reconcile closed; want it untouched", got.Status.LastRun, err)
	}
}

// A status write mid-run does not move the reconcile's resource to a spec it did not read. Seen in
// CI (test/lifecycle modules_test.go, "A class that moves to a newer module version"): a retry of a
// failed upgrade to v9.9.9 checkpointed its start after `kubectl conductor upgrade --to v1.1.0`
// set the spec; the status patch's response carried the new spec and generation into the
// reconcile, and the run of v9.9.9 recorded its failure as generation 3's (v1.1.0's), so the
// upgrade's --wait reported v1.1.0 as failed. An apply would likewise have recorded the spec it did
// not apply as applied (observedGeneration, moduleVersion).
func TestStatusWriteKeepsTheSpecTheReconcileRead(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	res := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 2},
		Spec: v1alpha1.InfraResourceSpec{Module: v1alpha1.ModuleSource{Source: "git::file:///m", Version: "v9.9.9"}}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.InfraResource{}).WithObjects(res).Build()
	ctx := context.Background()

	s := statusScope(t, c, "db")
	moved := s.res.DeepCopy()
	moved.Spec.Module.Version = "v1.1.0"
	moved.Generation = 3
	if err := c.Update(ctx, moved); err != nil {
		t.Fatal(err)
	}
	s.res.Status.LastRun = &v1alpha1.RunStatus{ID: "run-1", Result: v1alpha1.RunRunning, Generation: 2}
	if err := s.checkpoint(ctx); err != nil {
		t.Fatalf("a checkpoint after another writer changed the spec: %v, want it written", err)
	}
	if v := s.res.Spec.Module.Version; v != "v9.9.9" || s.res.Generation != 2 {
		t.Fatalf("after the checkpoint the reconcile holds version %s, generation %d; want v9.9.9, 2 (what it read and runs)", v, s.res.Generation)
	}
	got := &v1alpha1.InfraResource{}
	if err := c.Get(ctx, types.NamespacedName{Name: "db"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Module.Version != "v1.1.0" || got.Status.LastRun == nil || got.Status.LastRun.ID != "run-1" {
		t.Fatalf("stored: version %s, lastRun %+v; want v1.1.0 kept and the run recorded", got.Spec.Module.Version, got.Status.LastRun)
	}

	// A metadata write after it (a finalizer removed) must not send the old spec back: it conflicts.
	s.res.Finalizers = nil
	if err := c.Update(ctx, s.res); !apierrors.IsConflict(err) {
		t.Fatalf("an update of the reconcile's resource after the spec moved: %v, want a conflict", err)
	}
	// The next checkpoint still goes through.
	s.res.Status.LastRun.Result = v1alpha1.RunFailed
	if err := s.checkpoint(ctx); err != nil {
		t.Fatalf("a second checkpoint: %v", err)
	}
	if err := c.Get(ctx, types.NamespacedName{Name: "db"}, got); err != nil || got.Status.LastRun.Result != v1alpha1.RunFailed || got.Spec.Module.Version != "v1.1.0" {
		t.Fatalf("stored after the second checkpoint: %+v, %v", got, err)
	}
}
