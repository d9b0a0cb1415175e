package statebackend

import (
	"context"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

// Issue 46 item 1: a new leader's server adopts a run its predecessor's server issued credentials
// for: the lock the run took (its Lease names the run) is the adopted run's, so its writes and its
// unlock under that lock pass with the new credentials; a run the lock does not name takes nothing
// over and is refused.
func TestAnAdoptedRunWritesUnderTheLockItTookFromThePredecessor(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	old := startServer(t, fk, "ns", 0)
	a, _ := old.IssueRunAs("run-x", "db", nil) // never revoked: its manager died
	lockAs(t, a, "lock-x")

	next := startServer(t, fk, "ns", 0)
	other, revokeOther, took, err := next.IssueAdoptedRun(ctx, "run-y", "db", nil)
	if err != nil || took != "" {
		t.Fatalf("adopting a run the lock does not name: took %q, %v; want nothing taken over", took, err)
	}
	defer revokeOther()
	if st, _, _ := call(t, "POST", other.Address+"?ID=lock-x", other.Username, other.Password, stateJSON(t, "l", 1, nil)); st != 409 {
		t.Errorf("POST by a run that did not take the lock: %d, want 409", st)
	}

	b, revoke, took, err := next.IssueAdoptedRun(ctx, "run-x", "db", nil)
	if err != nil || took != "lock-x" {
		t.Fatalf("adopting the lock's run: took %q, %v; want lock-x", took, err)
	}
	if !next.Live("run-x") {
		t.Fatal("the adopted run is not live on the server that adopted it")
	}
	if st, out, _ := call(t, "POST", b.Address+"?ID=lock-x", b.Username, b.Password, stateJSON(t, "l", 1, nil)); st != 200 {
		t.Fatalf("POST by the adopted run under its lock: %d %s", st, out)
	}
	if st, out, _ := call(t, UnlockMethod, b.UnlockAddress, b.Username, b.Password, []byte(`{"ID":"lock-x"}`)); st != 200 {
		t.Fatalf("UNLOCK by the adopted run: %d %s", st, out)
	}
	if lock, err := next.Store().For("db").InspectLock(ctx); err != nil || lock != nil {
		t.Fatalf("lock after the adopted run's unlock: %+v, %v; want none", lock, err)
	}
	revoke()
	if got := storedSerial(t, next, "db"); got != 1 {
		t.Errorf("stored serial %d, want 1", got)
	}
}
