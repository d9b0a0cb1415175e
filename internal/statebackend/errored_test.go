package statebackend

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A state Terraform could not send (errored.tfstate) is kept as the pending state at once — in
// its Secret, so that a restart finds it — and written back by RetryPending; one older than the
// stored state is dropped; a run the server does not know is refused.
func TestKeepErroredState(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	s := NewServer(fk, "ns", DefaultHistoryLimit)
	h := s.Store().For("db")
	if err := h.Write(ctx, stateJSON(t, "l", 3, nil)); err != nil {
		t.Fatal(err)
	}
	_, revoke := s.IssueRunAs("run-1", "db", map[string]string{LabelResource: "db"})
	defer revoke()
	if _, err := s.Store().For("db").Lock(ctx, Lock{ID: "lock-1", Info: runLockInfo("run-1", "")}); err != nil {
		t.Fatal(err)
	}
	s.creds.takeOver(firstUser(s), "lock-1") // as its LOCK through the server would

	var refused *ErroredStateRefusedError
	if err := s.KeepErrored(ctx, "run-1", stateJSON(t, "l", 2, nil)); !errors.As(err, &refused) {
		t.Fatalf("an older errored state: %v; want it refused", err)
	}
	if _, pending := s.Pending("db"); pending {
		t.Error("an errored state older than the stored one was kept")
	}
	if err := s.KeepErrored(ctx, "run-1", stateJSON(t, "other", 4, nil)); !errors.As(err, &refused) {
		t.Fatalf("another lineage: %v; want it refused", err)
	}
	if _, pending := s.Pending("db"); pending {
		t.Error("an errored state of another lineage was kept")
	}

	if err := s.KeepErrored(ctx, "run-1", stateJSON(t, "l", 4, nil)); err != nil {
		t.Fatal(err)
	}
	if _, pending := s.Pending("db"); !pending {
		t.Fatal("a newer errored state was not kept")
	}
	if _, err := fk.CoreV1().Secrets("ns").Get(ctx, PendingSecretName(DefaultWorkspace, "db"), metav1.GetOptions{}); err != nil {
		t.Fatalf("the pending state's Secret (what a restart finds): %v", err)
	}
	if saved, err := s.RetryPending(ctx, "db"); err != nil || !saved {
		t.Fatalf("RetryPending = %v, %v; want it written", saved, err)
	}
	if st, _, err := h.Status(ctx); err != nil || st.Serial != 4 {
		t.Errorf("stored serial %d (%v), want 4", st.Serial, err)
	}

	if err := s.KeepErrored(ctx, "run-unknown", stateJSON(t, "l", 5, nil)); err == nil {
		t.Error("the errored state of a run the server does not know was kept")
	}
	if err := s.KeepErrored(ctx, "run-1", []byte("not json")); err == nil {
		t.Error("data that is not a state was kept")
	}
}

// firstUser is the username of the server's only run.
func firstUser(s *Server) string {
	for _, r := range s.creds.all() {
		return r.user
	}
	return ""
}

// An errored state sent once this replica no longer serves the resource's share is not kept here,
// and the lock its run took stays held after the run is revoked: the share's next owner finds the
// dead run's lock (and fences it) rather than a released lock over an older stored state. Before,
// KeepErrored returned before marking the state unkept, and the revoke released the lock.
func TestErroredStateOfALostShareKeepsItsLock(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	s := NewServer(fk, "ns", DefaultHistoryLimit)
	h := s.Store().For("db")
	if err := h.Write(ctx, stateJSON(t, "l", 3, nil)); err != nil {
		t.Fatal(err)
	}
	var serving atomic.Bool
	serving.Store(true)
	s.Serves = func(map[string]string) bool { return serving.Load() }
	_, revoke := s.IssueRunAs("run-1", "db", map[string]string{LabelResource: "db"})
	if _, err := h.Lock(ctx, Lock{ID: "lock-1", Info: runLockInfo("run-1", "")}); err != nil {
		t.Fatal(err)
	}
	s.creds.takeOver(firstUser(s), "lock-1")
	serving.Store(false)
	if err := s.KeepErrored(ctx, "run-1", stateJSON(t, "l", 4, nil)); !errors.Is(err, errNotServing) {
		t.Fatalf("KeepErrored on a share no longer served: %v, want errNotServing", err)
	}
	revoke()
	if l, err := h.InspectLock(ctx); err != nil || l == nil || l.ID != "lock-1" {
		t.Fatalf("the run's lock after its revoke: %+v, %v; want lock-1 still held", l, err)
	}
}

// With sharding, a replica that takes a bucket must see the pending states its last holder saved
// after this replica listed them: RelistPending makes the next request list the Secrets again.
// Before, they were listed once per process, and the new owner ran on the older stored state.
func TestRelistPendingSeesAStateSavedSinceTheLastListing(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	taker, holder := NewServer(fk, "ns", DefaultHistoryLimit), NewServer(fk, "ns", DefaultHistoryLimit)
	if err := taker.Store().For("db").Write(ctx, stateJSON(t, "l", 3, nil)); err != nil {
		t.Fatal(err)
	}
	if saved, err := taker.RetryPending(ctx, "db"); err != nil || saved {
		t.Fatalf("nothing pending yet: %v, %v", saved, err)
	}
	_, revoke := holder.IssueRunAs("run-1", "db", map[string]string{LabelResource: "db"})
	defer revoke()
	if _, err := holder.Store().For("db").Lock(ctx, Lock{ID: "lock-1", Info: runLockInfo("run-1", "")}); err != nil {
		t.Fatal(err)
	}
	holder.creds.takeOver(firstUser(holder), "lock-1")
	if err := holder.KeepErrored(ctx, "run-1", stateJSON(t, "l", 4, nil)); err != nil {
		t.Fatal(err)
	}
	if saved, _ := taker.RetryPending(ctx, "db"); saved {
		t.Fatal("a pending state was seen without a new listing")
	}
	taker.RelistPending()
	if saved, err := taker.RetryPending(ctx, "db"); err != nil || !saved {
		t.Fatalf("after RelistPending: %v, %v; want the holder's pending state written", saved, err)
	}
	if st, _, err := taker.Store().For("db").Status(ctx); err != nil || st.Serial != 4 {
		t.Fatalf("stored serial %d (%v), want 4", st.Serial, err)
	}
}
