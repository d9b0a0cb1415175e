package resource

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// A reclaim that destroyed the infrastructure and deleted the state, and then lost the write that
// drops its finalizer (a conflict with another writer, a restart), must finish on the next
// reconcile: the state it deleted itself is not a missing state (issue 31: 6 of 200 resources of a
// mass deletion were left in Deleting with StateMissing).
func TestReclaimFinishesAfterAWriteLostOnceTheStateIsDeleted(t *testing.T) {
	ctx := context.Background()
	c, kube := deletedResourceWithState(t, "db-1", "l-1")
	sfx := statebackend.SuffixFor("db-1")
	res := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "db-1"}}
	runs := &recordingRuns{}
	rec := events.NewFakeRecorder(100)
	r := newReconciler(t, Options{Client: c, APIReader: c, Kube: kube, Recorder: rec, Runs: runs,
		State: statebackend.Config{Namespace: reclaimNamespace}})
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: res.Name}}

	// A conflict is requeued, not returned: the resource must still be there.
	_, _ = r.Reconcile(ctx, req)
	if err := c.Get(ctx, req.NamespacedName, &v1alpha1.InfraResource{}); err != nil {
		t.Fatalf("the first reconcile's finalizer removal should have failed, leaving the resource: %v", err)
	}
	if runs.destroys != 1 {
		t.Fatalf("destroys after the first reconcile = %d, want 1", runs.destroys)
	}
	if _, found, _ := statebackend.NewStore(kube, reclaimNamespace).For(sfx).Status(ctx); found {
		t.Fatal("the state should be deleted by the first reconcile")
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("the second reconcile: %v", err)
	}
	got := &v1alpha1.InfraResource{}
	if err := c.Get(ctx, req.NamespacedName, got); !apierrors.IsNotFound(err) {
		t.Errorf("the resource should be gone after the second reconcile; got err=%v, phase %s, conditions %+v", err, got.Status.Phase, got.Status.Conditions)
	}
	if runs.destroys != 1 {
		t.Errorf("destroys = %d, want 1: nothing is destroyed twice", runs.destroys)
	}
	noStateMissingEvent(t, rec)
}

// A reclaim whose cache lags behind its own record of the destroy (the finalizer write lost, and
// the next reconcile reads the resource as it was before the destroy) must not call the state it
// deleted itself missing (issue 46: a spurious StateMissing, its condition and Warning event).
func TestReclaimWithALaggingCacheReportsNoMissingState(t *testing.T) {
	ctx := context.Background()
	truth, kube := deletedResourceWithState(t, "db-2", "l-2")
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "db-2"}}
	before := &v1alpha1.InfraResource{}
	if err := truth.Get(ctx, req.NamespacedName, before); err != nil {
		t.Fatal(err)
	}
	// The cache: what the API server holds, until lagging is set; then the resource as it was
	// before the first reconcile.
	lagging := false
	cache := interceptor.NewClient(truth, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if r, ok := obj.(*v1alpha1.InfraResource); ok && lagging {
			before.DeepCopyInto(r)
			return nil
		}
		return c.Get(ctx, key, obj, opts...)
	}})
	runs := &recordingRuns{}
	rec := events.NewFakeRecorder(100)
	r := newReconciler(t, Options{Client: cache, APIReader: truth, Kube: kube, Recorder: rec, Runs: runs,
		State: statebackend.Config{Namespace: reclaimNamespace}})

	_, _ = r.Reconcile(ctx, req) // destroys, records it, deletes the state; the finalizer write is lost
	if runs.destroys != 1 {
		t.Fatalf("destroys after the first reconcile = %d, want 1", runs.destroys)
	}
	lagging = true
	_, _ = r.Reconcile(ctx, req)
	got := &v1alpha1.InfraResource{}
	if err := truth.Get(ctx, req.NamespacedName, got); err == nil {
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == v1alpha1.ReasonStateMissing {
			t.Errorf("Ready = %s: %s", c.Reason, c.Message)
		}
	}
	lagging = false
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("the third reconcile: %v", err)
	}
	if err := truth.Get(ctx, req.NamespacedName, &v1alpha1.InfraResource{}); !apierrors.IsNotFound(err) {
		t.Errorf("the resource should be gone once the cache caught up; err=%v", err)
	}
	if runs.destroys != 1 {
		t.Errorf("destroys = %d, want 1", runs.destroys)
	}
	noStateMissingEvent(t, rec)
}

// reclaimNamespace is the controller's namespace in the reclaim specs.
const reclaimNamespace = "conductor-system"

// deletedResourceWithState is a deleted InfraResource name in a fake API server, holding the
// reclaim finalizer, applied once, its state (lineage, one random_pet) in a fake clientset's
// conductor-system; the first write that drops the finalizer fails with a conflict, as another
// writer's would. It returns the client and the clientset.
func deletedResourceWithState(t *testing.T, name, lineage string) (client.WithWatch, *kubefake.Clientset) {
	t.Helper()
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	res := &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1alpha1.FinalizerResource}, Generation: 1},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: "Pet", ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module: v1alpha1.ModuleSource{Source: "./m", Version: "v1"}},
	}
	sfx := statebackend.SuffixFor(res.Name)
	res.Status = v1alpha1.InfraResourceStatus{Phase: v1alpha1.ResourceBound, ObservedGeneration: 1,
		State: &v1alpha1.StateStatus{SecretName: statebackend.SecretName(statebackend.DefaultWorkspace, sfx), Serial: 1}}
	kube := kubefake.NewClientset()
	state := []byte(`{"version":4,"serial":1,"lineage":"` + lineage + `","resources":[{"mode":"managed","type":"random_pet","name":"p","instances":[{"attributes":{"id":"x"}}]}]}`)
	if err := statebackend.NewStore(kube, reclaimNamespace).For(sfx).Write(ctx, state); err != nil {
		t.Fatal(err)
	}
	var failOnce sync.Once
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.InfraResource{}).WithObjects(res).
		WithInterceptorFuncs(interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			var err error
			if r, ok := obj.(*v1alpha1.InfraResource); ok && !controllerutil.ContainsFinalizer(r, v1alpha1.FinalizerResource) {
				failOnce.Do(func() {
					err = apierrors.NewConflict(schema.GroupResource{Group: "conductor.io", Resource: "infraresources"}, r.Name, errors.New("the object has been modified"))
				})
			}
			if err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		}}).Build()
	if err := c.Delete(ctx, res); err != nil {
		t.Fatal(err)
	}
	return c, kube
}

// noStateMissingEvent fails t for each StateMissing event rec holds.
func noStateMissingEvent(t *testing.T, rec *events.FakeRecorder) {
	t.Helper()
	close(rec.Events)
	for e := range rec.Events {
		if strings.Contains(e, v1alpha1.ReasonStateMissing) {
			t.Errorf("event %q: the state the reclaim deleted itself was reported missing", e)
		}
	}
}

// Issue 46: a new leader leaves the lock of a run its predecessor started alone until that run
// can no longer write (LeaderFence), and meanwhile starts no run: a run would only fail
// StateLocked, and its record would replace the dead run's, by whose ID alone the lock is
// recovered (seen on kind: after the manager pod was deleted mid-apply, the lock stayed for good).
// Once the fence has passed, the lock is recovered and the reclaim goes on.
func TestNewLeaderFencesItsPredecessorsRunLock(t *testing.T) {
	ctx := context.Background()
	c, kube := deletedResourceWithState(t, "db-3", "l-3")
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "db-3"}}
	res := &v1alpha1.InfraResource{}
	if err := c.Get(ctx, req.NamespacedName, res); err != nil {
		t.Fatal(err)
	}
	started := metav1.Now()
	res.Status.LastRun = &v1alpha1.RunStatus{ID: "run-old", Operation: "apply", Result: v1alpha1.RunRunning, StartTime: &started,
		Who: "conductor@conductor-tf", Controller: "pod-old"}
	if err := c.Status().Update(ctx, res); err != nil {
		t.Fatal(err)
	}
	h := statebackend.NewStore(kube, reclaimNamespace).For(statebackend.SuffixFor("db-3"))
	if _, err := h.Lock(ctx, statebackend.Lock{ID: "lock-old", Who: "conductor@conductor-tf", Info: "conductor-tf run run-old"}); err != nil {
		t.Fatal(err)
	}
	runs := &recordingRuns{}
	r := newReconciler(t, Options{Client: c, APIReader: c, Kube: kube, Recorder: events.NewFakeRecorder(100), Runs: runs,
		State: statebackend.Config{Namespace: reclaimNamespace}, StateServer: statebackend.NewServer(kube, reclaimNamespace, 0),
		Identity: RunIdentity{Who: "conductor@conductor-tf", Controller: "pod-new"}, LeaderFence: time.Hour})

	result, err := r.Reconcile(ctx, req)
	if err != nil || result.RequeueAfter <= 0 {
		t.Fatalf("reconcile within the fence = %+v, %v; want a requeue", result, err)
	}
	if runs.destroys != 0 {
		t.Error("a run started while the predecessor's run could still write")
	}
	got := &v1alpha1.InfraResource{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil || got.Status.LastRun == nil || got.Status.LastRun.ID != "run-old" {
		t.Fatalf("the dead run's record was replaced (%+v, %v): its lock could never be recovered", got.Status.LastRun, err)
	}
	if l, _ := h.InspectLock(ctx); l == nil || l.ID != "lock-old" {
		t.Fatalf("lock within the fence: %+v; want lock-old kept", l)
	}

	r.parts().fence.EndForTesting(false, true) // the fence has passed
	_, _ = r.Reconcile(ctx, req)
	if l, _ := h.InspectLock(ctx); l != nil {
		t.Errorf("lock after the fence: %+v; want it recovered", l)
	}
	if runs.destroys != 1 {
		t.Errorf("destroys after the fence = %d, want 1", runs.destroys)
	}
}
