package statebackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestHistoryKeepsNAndRestores(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	store := NewStore(testKube, ns)
	store.HistoryLimit = 3
	h := store.For("hist").WithLabels(map[string]string{LabelResource: "hist"})
	versions := map[int64][]byte{}
	for serial := int64(1); serial <= 8; serial++ {
		versions[serial] = stateJSON(t, "lin-h", serial, map[string]int{"r": 50})
		if err := h.Write(ctx, versions[serial]); err != nil {
			t.Fatalf("write serial %d: %v", serial, err)
		}
	}
	hist, err := h.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 || hist[0].Serial != 7 || hist[1].Serial != 6 || hist[2].Serial != 5 {
		t.Fatalf("History = %+v, want serials 7, 6, 5", hist)
	}
	for _, v := range hist {
		if v.Lineage != "lin-h" || v.Time.IsZero() {
			t.Errorf("version %+v lacks lineage or time", v)
		}
	}
	// History Secrets are invisible to Terraform's reader: none carries the tfstate label.
	list, err := testKube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelStateHistory + "=hist"})
	if err != nil || len(list.Items) != 3 {
		t.Fatalf("history Secrets: %d, %v", len(list.Items), err)
	}
	for _, s := range list.Items {
		if _, ok := s.Labels["tfstate"]; ok || !strings.HasPrefix(s.Name, "tfstate-history-default-hist-") {
			t.Errorf("history Secret %s labels %v", s.Name, s.Labels)
		}
	}
	if cs := chunkSecrets(t, ns, "hist"); len(cs) != 1 {
		t.Errorf("state chunks beside history: %v", cs)
	}
	if got, err := h.Version(ctx, 6); err != nil || !bytes.Equal(got, versions[6]) {
		t.Fatalf("Version(6): equal=%v err=%v", bytes.Equal(got, versions[6]), err)
	}

	// Refused writes: another lineage, an older serial. Nothing changes.
	var conflict *ConflictError
	if err := h.Write(ctx, stateJSON(t, "lin-other", 9, nil)); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "lineage") {
		t.Errorf("write of another lineage: %v", err)
	}
	if err := h.Write(ctx, stateJSON(t, "lin-h", 3, nil)); !errors.As(err, &conflict) || !strings.Contains(err.Error(), "serial") {
		t.Errorf("write of an older serial: %v", err)
	}
	var invalid *InvalidStateError
	if err := h.Write(ctx, []byte("not json")); !errors.As(err, &invalid) {
		t.Errorf("write of garbage: %v", err)
	}
	if st, _, _ := h.Status(ctx); st.Serial != 8 {
		t.Fatalf("refused writes changed the state: %+v", st)
	}

	// Restore serial 6: written as serial 9, same content otherwise; serial 8 goes to history.
	if err := h.Restore(ctx, 6, "test-run"); err != nil {
		t.Fatal(err)
	}
	cur, _, err := h.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := decodeJSON(cur)
	if st.Serial != 9 || st.Lineage != "lin-h" {
		t.Fatalf("restored state is %+v, want serial 9 of lin-h", st)
	}
	want, _ := withSerial(versions[6], 9)
	if !bytes.Equal(cur, want) {
		t.Error("restored state differs from version 6 beyond its serial")
	}
	hist, _ = h.History(ctx)
	if len(hist) != 3 || hist[0].Serial != 8 {
		t.Errorf("History after restore = %+v, want 8 first", hist)
	}
	// Restoring that restore away again works too: serial 8 comes back as 10.
	if err := h.Restore(ctx, 8, "test-run"); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := h.Status(ctx); st.Serial != 10 {
		t.Errorf("after undoing the restore: %+v", st)
	}
	if err := h.Restore(ctx, 2, "test-run"); !errors.Is(err, ErrNoVersion) {
		t.Errorf("restore of a version not kept: %v", err)
	}
	// Restore honours the lock.
	if _, err := h.Lock(ctx, Lock{ID: "held", Who: "ops@laptop"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Restore(ctx, 7, "test-run"); !errors.As(err, new(*LockedError)) {
		t.Errorf("restore under someone's lock: %v", err)
	}
	if err := h.Unlock(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	// Delete takes the history along.
	if err := h.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if hist, _ := h.History(ctx); len(hist) != 0 {
		t.Errorf("history after Delete: %+v", hist)
	}
}

// TestHistoryOfBigStates keeps a version of over 1 MiB gzipped (chunked history Secrets) and
// restores it.
func TestHistoryOfBigStates(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	h := NewStore(testKube, ns).For("bighist")
	big := stateJSON(t, "lin-b", 1, map[string]int{"big": 3 << 20})
	if err := h.Write(ctx, big); err != nil {
		t.Fatal(err)
	}
	if err := h.Write(ctx, stateJSON(t, "lin-b", 2, map[string]int{"small": 10})); err != nil {
		t.Fatal(err)
	}
	list, _ := testKube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelStateHistory + "=bighist"})
	if len(list.Items) < 2 {
		t.Fatalf("a 2+ MiB version is kept in %d Secrets", len(list.Items))
	}
	if got, err := h.Version(ctx, 1); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Version(1) of a chunked version: equal=%v err=%v", bytes.Equal(got, big), err)
	}
	if err := h.Restore(ctx, 1, "test-run"); err != nil {
		t.Fatal(err)
	}
	if st, _, err := h.Status(ctx); err != nil || st.Serial != 3 || st.Resources != 1 {
		t.Fatalf("after restoring the big version: %+v, %v", st, err)
	}
}

// TestRestoreLocksAsARun: the lock a restore takes names the run it is recorded as, so that a
// controller that dies mid-restore leaves a lock the next one recovers by that run's id (issue 17:
// it was taken as the controller itself, user@host, and recovered by nobody).
func TestRestoreLocksAsARun(t *testing.T) {
	ctx := context.Background()
	fk := fake.NewClientset()
	var infos []string
	fk.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			if l, ok := u.GetObject().(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
				infos = append(infos, l.Annotations[lockInfoAnnotation])
			}
		}
		if c, ok := a.(k8stesting.CreateAction); ok {
			if l, ok := c.GetObject().(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
				infos = append(infos, l.Annotations[lockInfoAnnotation])
			}
		}
		return false, nil, nil
	})
	store := NewStore(fk, "ns")
	store.HistoryLimit = 3
	h := store.For("rst")
	for serial := int64(1); serial <= 2; serial++ {
		if err := h.Write(ctx, stateJSON(t, "lin-r", serial, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Restore(ctx, 1, "restore-run-7"); err != nil {
		t.Fatal(err)
	}
	if len(infos) == 0 {
		t.Fatal("the restore took no lock")
	}
	var lock Lock
	if err := json.Unmarshal([]byte(infos[0]), &lock); err != nil {
		t.Fatal(err)
	}
	if id, ok := RunOfLock(&lock); !ok || id != "restore-run-7" {
		t.Errorf("the restore's lock names run %q (%v), want restore-run-7; info %q", id, ok, lock.Info)
	}
}
