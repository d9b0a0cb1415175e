package resource

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// adopterOf is an Adopter over the one resource res (on the fake client), with a real state
// server on a fake clientset, and the recorder its events go to.
func adopterOf(t *testing.T, res *v1alpha1.InfraResource) (*Adopter, *events.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(res).Build()
	rec := events.NewFakeRecorder(10)
	a, err := NewAdopter(c, statebackend.NewServer(kubefake.NewClientset(), reclaimNamespace, 0), rec, "new-pod")
	if err != nil {
		t.Fatal(err)
	}
	return a, rec
}

// runningApply is resource db-x on runner pool p whose last run, run-x, an apply old-pod started,
// is recorded Running.
func runningApply() *v1alpha1.InfraResource {
	start := metav1.NewTime(time.Now().Add(-30 * time.Second))
	return &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: "db-x", Generation: 1, Finalizers: []string{v1alpha1.FinalizerResource}},
		Spec:       v1alpha1.InfraResourceSpec{ResourceKind: "Pet", RunInputs: v1alpha1.RunInputs{RunnerPool: "p"}},
		Status: v1alpha1.InfraResourceStatus{
			State:   &v1alpha1.StateStatus{SecretName: statebackend.SecretName(statebackend.DefaultWorkspace, statebackend.SuffixFor("db-x")), Serial: 1},
			LastRun: &v1alpha1.RunStatus{ID: "run-x", Operation: "apply", Result: v1alpha1.RunRunning, Generation: 1, StartTime: &start, Controller: "old-pod"}},
	}
}

// Issue 66 item 3: the run protocol's vouching needs no Reconciler. Vouch refuses, saying why, a
// run that is not the resource's last apply recorded Running on the runner's pool, or whose
// resource is going or has no state; it issues no credentials and records nothing then.
func TestVouchRefusesARunTheResourceDoesNotRecord(t *testing.T) {
	req := runners.AdoptRequest{Key: "db-x", RunID: "run-x", Pool: "p", Runner: "p-0", Operation: "apply"}
	for name, c := range map[string]struct {
		change func(*v1alpha1.InfraResource, *runners.AdoptRequest)
		want   string
	}{
		"a destroy":        {func(_ *v1alpha1.InfraResource, q *runners.AdoptRequest) { q.Operation = "destroy" }, "only applies"},
		"another pool":     {func(_ *v1alpha1.InfraResource, q *runners.AdoptRequest) { q.Pool = "q" }, `not "q"`},
		"not the last run": {func(_ *v1alpha1.InfraResource, q *runners.AdoptRequest) { q.RunID = "run-y" }, "not the last run"},
		"a run over": {func(r *v1alpha1.InfraResource, _ *runners.AdoptRequest) {
			r.Status.LastRun.Result = v1alpha1.RunSucceeded
		}, "not the last run"},
		"no state":            {func(r *v1alpha1.InfraResource, _ *runners.AdoptRequest) { r.Status.State = nil }, "no state name"},
		"an unknown resource": {func(_ *v1alpha1.InfraResource, q *runners.AdoptRequest) { q.Key = "db-y" }, "db-y"},
		"being deleted": {func(r *v1alpha1.InfraResource, _ *runners.AdoptRequest) {
			now := metav1.Now()
			r.DeletionTimestamp = &now
		}, "being deleted"},
	} {
		t.Run(name, func(t *testing.T) {
			res, q := runningApply(), req
			c.change(res, &q)
			a, rec := adopterOf(t, res)
			got, err := a.Vouch(context.Background(), q)
			if err == nil || got != nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Vouch: %+v, %v; want a refusal saying %q", got, err, c.want)
			}
			if len(rec.Events) != 0 {
				t.Fatalf("recorded %q; want no event for a refused run", <-rec.Events)
			}
		})
	}
}

// A run the resource records as its last apply, Running, on the runner's pool is vouched for:
// new state credentials and a RunAdopted event naming its starter and this manager.
func TestVouchIssuesCredentialsForTheRecordedRun(t *testing.T) {
	a, rec := adopterOf(t, runningApply())
	got, err := a.Vouch(context.Background(), runners.AdoptRequest{Key: "db-x", RunID: "run-x", Pool: "p", Runner: "p-0", Operation: "apply"})
	if err != nil {
		t.Fatal(err)
	}
	defer got.Revoke()
	if got.Username == "" || got.Password == "" || got.Revoke == nil {
		t.Fatalf("adoption %+v; want credentials and a revoke", got)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, v1alpha1.ReasonRunAdopted) || !strings.Contains(e, "old-pod") || !strings.Contains(e, "new-pod") {
			t.Fatalf("event %q; want RunAdopted naming old-pod and new-pod", e)
		}
	default:
		t.Fatal("no event recorded")
	}
}

// NewAdopter refuses to build an Adopter that could not vouch.
func TestNewAdopterNeedsItsCollaborators(t *testing.T) {
	if _, err := NewAdopter(nil, nil, nil, ""); err == nil {
		t.Fatal("NewAdopter(nil...) built an Adopter")
	}
}
