package statebackend

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// lockAs takes the state's lock through the server as run c, with lock ID id.
func lockAs(t *testing.T, c RunCredentials, id string) {
	t.Helper()
	body, _ := json.Marshal(Lock{ID: id, Operation: "OperationTypeApply", Who: "run@pod"})
	if st, out, _ := call(t, LockMethod, c.LockAddress, c.Username, c.Password, body); st != 200 {
		t.Fatalf("LOCK %s: %d %s", id, st, out)
	}
}

// storedSerial is the serial of suffix's stored state.
func storedSerial(t *testing.T, s *Server, suffix string) int64 {
	t.Helper()
	st, found, err := s.Store().For(suffix).Status(context.Background())
	if err != nil || !found {
		t.Fatalf("stored state of %s: found %v, %v", suffix, found, err)
	}
	return st.Serial
}

// Issue 46: a write is accepted only from the run holding the lock as the Lease stores it now.
// Before, the server trusted the Lease as it had last written it: a run whose lock was released
// and taken over behind the server's back (a new leader recovering it, then another run locking)
// still wrote, and a run holding no lock wrote to an unlocked state.
func TestWriteNeedsTheLockAsStored(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	srv := startServer(t, fk, "ns", 0)
	a, revokeA := srv.IssueRunAs("run-a", "db", nil)
	defer revokeA()
	if st, out, _ := call(t, "POST", a.Address, a.Username, a.Password, stateJSON(t, "l", 1, nil)); st != 409 || !strings.Contains(out, "lock") {
		t.Errorf("POST without a lock on an unlocked state: %d %s; want 409 naming the lock", st, out)
	}
	if _, found, _ := srv.Store().For("db").Status(ctx); found {
		t.Fatal("a write without the lock was stored")
	}

	lockAs(t, a, "lock-a")
	if st, out, _ := call(t, "POST", a.Address+"?ID=lock-a", a.Username, a.Password, stateJSON(t, "l", 2, nil)); st != 200 {
		t.Fatalf("POST under the run's own lock: %d %s", st, out)
	}
	// Behind the server's back the lock is released and another takes it.
	if err := unlockFresh(ctx, fk, "ns", DefaultWorkspace, "db", "lock-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := acquireFresh(ctx, fk, "ns", DefaultWorkspace, "db", nil, Lock{ID: "lock-b", Who: "other@host"}); err != nil {
		t.Fatal(err)
	}
	st, out, _ := call(t, "POST", a.Address+"?ID=lock-a", a.Username, a.Password, stateJSON(t, "l", 3, nil))
	var holder Lock
	if st != 423 || json.Unmarshal([]byte(out), &holder) != nil || holder.ID != "lock-b" {
		t.Errorf("POST under a lock taken over since: %d %s; want 423 with lock-b", st, out)
	}
	if got := storedSerial(t, srv, "db"); got != 2 {
		t.Errorf("stored serial %d after a write under a lost lock, want 2", got)
	}

	// A lock ID the run did not take is not its own, even when it is the one held.
	b, revokeB := srv.IssueRunAs("run-b", "db", nil)
	defer revokeB()
	if st, _, _ := call(t, "POST", b.Address+"?ID=lock-b", b.Username, b.Password, stateJSON(t, "l", 3, nil)); st != 409 {
		t.Errorf("POST under a lock another took: %d, want 409", st)
	}
	if got := storedSerial(t, srv, "db"); got != 2 {
		t.Errorf("stored serial %d after a write under another's lock, want 2", got)
	}
}

// Issue 46: two writes of one serial with different content are two writers: the second is
// refused (409) and the stored state kept; the same content again (a client's retry) is accepted.
// Before, an equal serial was accepted whatever it held, so an old N+1 overwrote a newer N+1.
func TestEqualSerialDifferentContentIsRefused(t *testing.T) {
	fk := fake.NewClientset()
	srv := startServer(t, fk, "ns", 0)
	a, revoke := srv.IssueRunAs("run-a", "db", nil)
	defer revoke()
	lockAs(t, a, "lock-a")
	newer := stateJSON(t, "l", 5, map[string]int{"kept": 8})
	if st, out, _ := call(t, "POST", a.Address+"?ID=lock-a", a.Username, a.Password, newer); st != 200 {
		t.Fatalf("POST: %d %s", st, out)
	}
	if st, _, _ := call(t, "POST", a.Address+"?ID=lock-a", a.Username, a.Password, newer); st != 200 {
		t.Errorf("the same state again: %d, want 200", st)
	}
	older := stateJSON(t, "l", 5, map[string]int{"lost": 8})
	if st, out, _ := call(t, "POST", a.Address+"?ID=lock-a", a.Username, a.Password, older); st != 409 || !strings.Contains(out, "serial 5") {
		t.Errorf("serial 5 with other content: %d %s; want 409 naming the serial", st, out)
	}
	if got, _, _ := srv.Store().For("db").Read(context.Background()); string(got) != string(newer) {
		t.Error("the stored serial 5 was overwritten by another serial 5")
	}
	var refused *ErroredStateRefusedError
	if err := srv.KeepErrored(context.Background(), "run-a", older); !errors.As(err, &refused) || !strings.Contains(err.Error(), "serial 5") {
		t.Fatalf("an errored state of the stored serial with other content: %v; want it refused", err)
	}
	if _, pending := srv.Pending("db"); pending {
		t.Error("an errored state of the stored serial with other content was kept to be written back")
	}
}

// Issue 46: an errored state is kept only for the run that produced it. A run revoked while its
// errored state could not be kept (the API server failed) keeps its lock and counts as live, and
// its state is taken later while the Lease still stores that lock; once the lock is gone, it is
// refused (ErroredStateRefusedError) and the run is no longer live.
func TestErroredStateKeptOnlyForItsRun(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	fail := &atomic.Bool{}
	fk.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail.Load() {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	srv := startServer(t, fk, "ns", 0)
	seed := srv.Store().For("db")
	if err := seed.Write(ctx, stateJSON(t, "l", 3, nil)); err != nil {
		t.Fatal(err)
	}

	a, revokeA := srv.IssueRunAs("run-a", "db", nil)
	lockAs(t, a, "lock-a")
	fail.Store(true)
	if err := srv.KeepErrored(ctx, "run-a", stateJSON(t, "l", 4, nil)); err == nil {
		t.Fatal("KeepErrored succeeded while the state could not be read")
	}
	revokeA()
	if l, _ := seed.InspectLock(ctx); l == nil || l.ID != "lock-a" {
		t.Fatalf("lock after revoking a run whose errored state is not kept: %+v; want lock-a kept", l)
	}
	if !srv.Live("run-a") {
		t.Error("a run whose errored state is not kept is not live: its lock would be recovered as a dead run's")
	}
	fail.Store(false)
	if err := srv.KeepErrored(ctx, "run-a", stateJSON(t, "l", 4, nil)); err != nil {
		t.Fatalf("KeepErrored once the API server answers: %v", err)
	}
	if saved, err := srv.RetryPending(ctx, "db"); err != nil || !saved {
		t.Fatalf("RetryPending = %v, %v", saved, err)
	}
	if got := storedSerial(t, srv, "db"); got != 4 {
		t.Errorf("stored serial %d, want 4", got)
	}
	if l, _ := seed.InspectLock(ctx); l != nil || srv.Live("run-a") {
		t.Errorf("after the errored state was written back: lock %+v, live %v; want released, not live", l, srv.Live("run-a"))
	}

	// A run whose errored state turns out stored already (its last write did reach the server):
	// nothing to keep, and the lock revoke kept is released.
	c, revokeC := srv.IssueRunAs("run-c", "db", nil)
	lockAs(t, c, "lock-c0")
	five := stateJSON(t, "l", 5, nil)
	if st, out, _ := call(t, "POST", c.Address+"?ID=lock-c0", c.Username, c.Password, five); st != 200 {
		t.Fatalf("POST: %d %s", st, out)
	}
	fail.Store(true)
	_ = srv.KeepErrored(ctx, "run-c", five)
	revokeC()
	fail.Store(false)
	if l, _ := seed.InspectLock(ctx); l == nil || l.ID != "lock-c0" {
		t.Fatalf("lock after revoking a run whose errored state is not kept: %+v", l)
	}
	if err := srv.KeepErrored(ctx, "run-c", five); err != nil {
		t.Fatalf("an errored state stored already: %v", err)
	}
	if l, _ := seed.InspectLock(ctx); l != nil || srv.Live("run-c") {
		t.Errorf("after finding its errored state stored: lock %+v, live %v; want released, not live", l, srv.Live("run-c"))
	}

	b, revokeB := srv.IssueRunAs("run-b", "db", nil)
	lockAs(t, b, "lock-b")
	fail.Store(true)
	_ = srv.KeepErrored(ctx, "run-b", stateJSON(t, "l", 6, nil))
	revokeB()
	fail.Store(false)
	// A person force-unlocks, and another run takes the state.
	if err := unlockFresh(ctx, fk, "ns", DefaultWorkspace, "db", "lock-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := acquireFresh(ctx, fk, "ns", DefaultWorkspace, "db", nil, Lock{ID: "lock-c", Who: "other@host"}); err != nil {
		t.Fatal(err)
	}
	var refused *ErroredStateRefusedError
	if err := srv.KeepErrored(ctx, "run-b", stateJSON(t, "l", 6, nil)); !errors.As(err, &refused) {
		t.Fatalf("errored state of a run whose lock is gone: %v; want ErroredStateRefusedError", err)
	}
	if _, pending := srv.Pending("db"); pending || srv.Live("run-b") {
		t.Errorf("after the refusal: pending %v, live %v; want neither", pending, srv.Live("run-b"))
	}
	if err := srv.KeepErrored(ctx, "run-new", stateJSON(t, "l", 6, nil)); !errors.As(err, &refused) {
		t.Errorf("errored state under an unknown run: %v; want ErroredStateRefusedError", err)
	}
}

// Issues 46 and 51: a run is served only while this process may serve it — it leads (Leading), and
// with sharding its resource's share is held here (Serves, asked with the run's labels). Once
// either lapses every request of the run is refused (503) and no errored state is kept; then a
// lapsed leader's RevokeAll ends every credential, keeping the lock of a run whose errored state
// it refused, and a replica still serves the runs of the shares it holds.
func TestRunRefusedOnceNotServed(t *testing.T) {
	cases := []struct {
		name  string
		lapse func(srv *Server, lapsed *atomic.Bool)
		says  string
		then  func(t *testing.T, srv *Server, lapsed *atomic.Bool, a RunCredentials)
	}{
		{
			name:  "the leadership lapsed",
			lapse: func(srv *Server, lapsed *atomic.Bool) { srv.Leading = func() bool { return !lapsed.Load() } },
			says:  "no longer leads",
			then: func(t *testing.T, srv *Server, lapsed *atomic.Bool, a RunCredentials) {
				srv.RevokeAll()
				lapsed.Store(false)
				if st, _, _ := call(t, "GET", a.Address, a.Username, a.Password, nil); st != 401 {
					t.Errorf("GET after RevokeAll: %d; want 401", st)
				}
				// Its errored state (serial 2, newer than the stored 1) was refused, not kept: the
				// lock stays, so the next leader runs on the older stored state only once it has
				// recovered the dead run's lock after its fence (issue 64), never at once.
				if l, _ := srv.Store().For("db").InspectLock(context.Background()); l == nil || l.ID != "lock-a" {
					t.Errorf("lock after RevokeAll: %+v; want lock-a kept", l)
				}
			},
		},
		{
			name: "the resource's bucket moved to another replica",
			lapse: func(srv *Server, lapsed *atomic.Bool) {
				srv.Serves = func(labels map[string]string) bool { return labels[LabelResource] != "db" || !lapsed.Load() }
			},
			says: "no longer serves this resource's share",
			then: func(t *testing.T, srv *Server, _ *atomic.Bool, _ RunCredentials) {
				b, revoke := srv.IssueRunAs("run-b", "cache", map[string]string{LabelResource: "cache"})
				defer revoke()
				if st, out, _ := call(t, "GET", b.Address, b.Username, b.Password, nil); st == 503 {
					t.Errorf("GET of a run of a share still served: %d %s", st, out)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv := startServer(t, fake.NewClientset(), "ns", 0)
			var lapsed atomic.Bool
			tc.lapse(srv, &lapsed)
			a, revoke := srv.IssueRunAs("run-a", "db", map[string]string{LabelResource: "db"})
			defer revoke()
			lockAs(t, a, "lock-a")
			if st, out, _ := call(t, "POST", a.Address+"?ID=lock-a", a.Username, a.Password, stateJSON(t, "l", 1, nil)); st != 200 {
				t.Fatalf("POST while served: %d %s", st, out)
			}
			lapsed.Store(true)
			if st, out, _ := call(t, "POST", a.Address+"?ID=lock-a", a.Username, a.Password, stateJSON(t, "l", 2, nil)); st != 503 || !strings.Contains(out, tc.says) {
				t.Errorf("POST once %s: %d %s; want 503 saying %q", tc.name, st, out, tc.says)
			}
			if st, _, _ := call(t, "GET", a.Address, a.Username, a.Password, nil); st != 503 {
				t.Errorf("GET once %s: %d; want 503", tc.name, st)
			}
			if err := srv.KeepErrored(ctx, "run-a", stateJSON(t, "l", 2, nil)); err == nil {
				t.Errorf("an errored state was kept once %s", tc.name)
			}
			if got := storedSerial(t, srv, "db"); got != 1 {
				t.Errorf("stored serial %d, want 1", got)
			}
			tc.then(t, srv, &lapsed, a)
		})
	}
}
