package resource

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// attachingRuns is a recordingRuns that also carries on adopted runs: Attach answers for the run
// adopted names (none when ""), with an applied outcome, and records that events were given.
type attachingRuns struct {
	recordingRuns
	adopted  string
	attached []string
	events   bool
}

func (f *attachingRuns) Attach(_ context.Context, _, runID string, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, bool, error) {
	if runID == "" || runID != f.adopted {
		return nil, false, nil
	}
	f.attached = append(f.attached, runID)
	f.events = opts.Events != nil
	return &tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{ID: "p1"}}, true, nil
}

// runningOnPool is a static resource on runner pool p whose last run, run-x, an apply another
// manager started, is recorded Running; its state is stored.
func runningOnPool(t *testing.T) (*Reconciler, *attachingRuns, ctrl.Request) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	start := metav1.NewTime(time.Now().Add(-30 * time.Second))
	sfx := statebackend.SuffixFor("db-x")
	res := &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "db-x", Generation: 1, Finalizers: []string{v1alpha1.FinalizerResource, v1alpha1.FinalizerInUse}},
		Spec: v1alpha1.InfraResourceSpec{ResourceKind: "Pet", ReclaimPolicy: v1alpha1.ReclaimDelete, RunInputs: v1alpha1.RunInputs{RunnerPool: "p"},
			Module: v1alpha1.ModuleSource{Source: "./m", Version: "v1"}},
		Status: v1alpha1.InfraResourceStatus{Phase: v1alpha1.ResourceProvisioning,
			State:   &v1alpha1.StateStatus{SecretName: statebackend.SecretName(statebackend.DefaultWorkspace, sfx), Serial: 1},
			LastRun: &v1alpha1.RunStatus{ID: "run-x", Operation: "apply", Result: v1alpha1.RunRunning, Generation: 1, StartTime: &start, Controller: "old-pod"}},
	}
	kube := kubefake.NewClientset()
	if err := statebackend.NewStore(kube, reclaimNamespace).For(sfx).Write(context.Background(),
		[]byte(`{"version":4,"serial":1,"lineage":"l","resources":[]}`)); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.InfraResource{}).WithObjects(res).Build()
	runs := &attachingRuns{}
	r := newReconciler(t, Options{Client: c, APIReader: c, Kube: kube, Recorder: events.NewFakeRecorder(100), Runs: runs,
		State: statebackend.Config{Namespace: reclaimNamespace}, RunnerFence: time.Hour, Identity: RunIdentity{Controller: "new-pod"}})
	return r, runs, ctrl.Request{NamespacedName: types.NamespacedName{Name: res.Name}}
}

// Issue 46 item 1: a resource whose last run a predecessor started on a runner pool waits, while
// the fence lasts, for that run to be resumed here (no run starts); once it was adopted, the
// reconcile attaches to it and records its outcome as that run's (the same ID, Succeeded), with no
// apply of its own.
func TestAReconcileWaitsForThenAttachesToAnAdoptedRun(t *testing.T) {
	ctx := context.Background()
	r, runs, req := runningOnPool(t)

	result, err := r.Reconcile(ctx, req)
	if err != nil || result.RequeueAfter < 50*time.Minute || runs.applies != 0 {
		t.Fatalf("not adopted yet, within the fence: result %+v, err %v, applies %d; want a wait for the fence and no run", result, err, runs.applies)
	}

	runs.adopted = "run-x"
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if len(runs.attached) != 1 || !runs.events || runs.applies != 0 {
		t.Fatalf("attached %v (events %v), applies %d; want one attach with the events sink and no apply", runs.attached, runs.events, runs.applies)
	}
	if last := got.Status.LastRun; last.ID != "run-x" || last.Result != v1alpha1.RunSucceeded || last.Controller != "old-pod" {
		t.Fatalf("last run %+v; want run-x Succeeded, as its starter recorded it", last)
	}
}

// Once the fence is over, a predecessor's run not adopted is dead: a new run starts.
func TestAfterTheFenceARunNotAdoptedIsNotWaitedFor(t *testing.T) {
	ctx := context.Background()
	r, runs, req := runningOnPool(t)
	r.parts().fence.EndForTesting(true, false)
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if runs.applies != 1 || len(runs.attached) != 0 || got.Status.LastRun.ID == "run-x" {
		t.Fatalf("applies %d, attached %v, last run %s; want a new run", runs.applies, runs.attached, got.Status.LastRun.ID)
	}
}

// An adopted run's outcome is that of the generation it was started for: a spec changed since is
// not marked applied, and runs next.
func TestAnAttachedRunOfAnOlderGenerationLeavesTheNewSpecToRun(t *testing.T) {
	ctx := context.Background()
	r, runs, req := runningOnPool(t)
	runs.adopted = "run-x"
	res := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, req.NamespacedName, res); err != nil {
		t.Fatal(err)
	}
	res.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain // a new generation while the run went on
	res.Generation = 2                              // the fake client does not count generations
	if err := r.Update(ctx, res); err != nil {
		t.Fatal(err)
	}
	if err := r.Get(ctx, req.NamespacedName, res); err != nil || res.Generation == 1 {
		t.Fatalf("generation %d, %v; want a new one", res.Generation, err)
	}
	result, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 1 || got.Status.LastRun.Generation != 1 || got.Status.LastRun.Result != v1alpha1.RunSucceeded {
		t.Fatalf("observed generation %d, last run %+v; want generation 1 applied, not %d", got.Status.ObservedGeneration, got.Status.LastRun, got.Generation)
	}
	if run, _ := needsRun(got, time.Now(), time.Hour); !run || result.RequeueAfter > 2*time.Second {
		t.Fatalf("needs a run %v, requeue %s; want the new generation to run next, soon", run, result.RequeueAfter)
	}
}
