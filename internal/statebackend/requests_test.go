package statebackend

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// requests lists the API requests fk received since it was last reset, as "verb resource",
// sorted.
func requests(fk *fake.Clientset) []string {
	var out []string
	for _, a := range fk.Actions() {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	sort.Strings(out)
	fk.ClearActions()
	return out
}

// TestOneRunCostsFewRequests counts the API requests of what a run does through a Store: lock,
// write a one-chunk state twice, unlock, then a second run's lock and unlock. A one-chunk state
// is one read and one write (plus its history); a lock and an unlock, with the Lease known from
// this Store's last write, are one write each.
func TestOneRunCostsFewRequests(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	h := NewStore(fk, "ns").For("count")
	state := func(serial int) []byte {
		return []byte(fmt.Sprintf(`{"version":4,"serial":%d,"lineage":"l-1","outputs":{},"resources":[]}`, serial))
	}
	steps := []struct {
		name string
		do   func() error
		want []string
	}{
		{"first lock (no Lease yet)", func() error { _, err := h.Lock(ctx, Lock{ID: "a"}); return err }, []string{"create leases"}},
		{"first write", func() error { return h.Write(ctx, state(1)) }, []string{"create secrets", "get secrets"}},
		{"second write (the first kept in history)", func() error { return h.Write(ctx, state(2)) },
			[]string{"create secrets", "get secrets", "list secrets", "update secrets"}},
		{"unlock", func() error { return h.Unlock(ctx, "a") }, []string{"update leases"}},
		{"next run's lock", func() error { _, err := h.Lock(ctx, Lock{ID: "b"}); return err }, []string{"update leases"}},
		{"next run's unlock", func() error { return h.Unlock(ctx, "b") }, []string{"update leases"}},
	}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := requests(fk); strings.Join(got, ", ") != strings.Join(st.want, ", ") {
			t.Errorf("%s: requests %v, want %v", st.name, got, st.want)
		}
	}
	if got, _, err := h.Read(ctx); err != nil || string(got) != string(state(2)) {
		t.Fatalf("stored state %s, %v", got, err)
	}
}

// TestStaleLeaseGuessIsReadAgain: a Lease changed behind the Store's back (released and taken by
// another holder, not through this Store) is never overwritten from the Store's stale copy: the
// write conflicts on the real API server, the Lease is read again, and the lock is refused naming
// the real holder. A Lease deleted behind its back is created again.
func TestStaleLeaseGuessIsReadAgain(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	h := NewStore(testKube, ns).For("stale")
	if _, err := h.Lock(ctx, Lock{ID: "mine"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Unlock(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := acquireFresh(ctx, testKube, ns, DefaultWorkspace, "stale", nil, Lock{ID: "theirs"}); err != nil {
		t.Fatal(err)
	}
	held, err := h.Lock(ctx, Lock{ID: "mine-again"})
	var locked *LockedError
	if !errors.As(err, &locked) || held == nil || held.ID != "theirs" {
		t.Fatalf("lock over another's: held %+v, err %v; want a LockedError naming theirs", held, err)
	}
	if err := h.Unlock(ctx, "mine-again"); !errors.As(err, &locked) {
		t.Fatalf("unlock of a lock not held: %v, want a LockedError", err)
	}
	if err := releaseLock(ctx, testKube, ns, DefaultWorkspace, "stale", "theirs"); err != nil {
		t.Fatal(err)
	}
	if err := testKube.CoordinationV1().Leases(ns).Delete(ctx, LeaseName(DefaultWorkspace, "stale"), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Lock(ctx, Lock{ID: "after-delete"}); err != nil {
		t.Fatalf("lock after the Lease was deleted: %v", err)
	}
	lock, err := inspectLock(ctx, testKube, ns, DefaultWorkspace, "stale")
	if err != nil || lock == nil || lock.ID != "after-delete" {
		t.Fatalf("lock after the Lease was deleted: %+v, %v", lock, err)
	}
}

// TestWriteFromWhatTheRunRead: a run's write starts from the state as the run last read or wrote
// it, so a one-chunk state is written with one request (history off here); a state changed behind
// its back (another lineage written by someone else) is not overwritten from the stale copy: the
// update conflicts on the real API server, the state is read again and the write refused.
func TestWriteFromWhatTheRunRead(t *testing.T) {
	ctx := context.Background()
	doc := func(lineage string, serial int) []byte {
		return []byte(fmt.Sprintf(`{"version":4,"serial":%d,"lineage":%q,"outputs":{},"resources":[]}`, serial, lineage))
	}
	fk := fake.NewClientset()
	counted := NewStore(fk, "ns")
	counted.HistoryLimit = 0
	h := counted.For("known")
	seen, err := h.readStored(ctx)
	if err != nil {
		t.Fatal(err)
	}
	requests(fk)
	for serial := 1; serial <= 3; serial++ {
		if seen, err = writeFrom(ctx, h, doc("l-1", serial), true, seen); err != nil {
			t.Fatal(err)
		}
		if got := requests(fk); len(got) != 1 {
			t.Errorf("write of serial %d from what the run saw: requests %v, want one", serial, got)
		}
	}

	ns := newNamespace(t)
	mine := NewStore(testKube, ns).For("known")
	seen, err = mine.readStored(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seen, err = writeFrom(ctx, mine, doc("l-1", 1), true, seen); err != nil {
		t.Fatal(err)
	}
	// Someone else replaces it with another lineage, not through this run.
	if err := NewStore(testKube, ns).For("known").write(ctx, doc("l-other", 7), false); err != nil {
		t.Fatal(err)
	}
	_, err = writeFrom(ctx, mine, doc("l-1", 2), true, seen)
	var conflict *ConflictError
	if !errors.As(err, &conflict) || conflict.Stored.Lineage != "l-other" {
		t.Fatalf("write from a stale copy over another lineage: %v; want a ConflictError naming l-other", err)
	}
	if st, _, err := readStatus(ctx, testKube, ns, DefaultWorkspace, "known", nil); err != nil || st.Lineage != "l-other" || st.Serial != 7 {
		t.Fatalf("stored after the refused write: %+v, %v; want l-other serial 7 kept", st, err)
	}
}

// TestUndecodablePendingStopsOnlyItsState: a pending-state Secret that does not decode stops its
// own state, with its name in the error, and no other: the listing of pending states is not
// failed by it.
func TestUndecodablePendingStopsOnlyItsState(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	_, err := fk.CoreV1().Secrets("ns").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: PendingSecretName(DefaultWorkspace, "bad"), Namespace: "ns",
			Labels: map[string]string{LabelPendingState: "true"}},
		Data: map[string][]byte{stateKey: []byte("not gzip")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, fk, "ns", DefaultHistoryLimit)
	if saved, err := srv.RetryPending(ctx, "good"); err != nil || saved {
		t.Fatalf("another state: saved=%v, %v; want nothing to save and no error", saved, err)
	}
	if _, err := srv.RetryPending(ctx, "bad"); err == nil || !strings.Contains(err.Error(), PendingSecretName(DefaultWorkspace, "bad")) {
		t.Fatalf("the undecodable pending state: %v; want an error naming its Secret", err)
	}
}
