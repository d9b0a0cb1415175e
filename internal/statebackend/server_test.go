package statebackend

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// startServer starts a Server on a free loopback port until the test ends.
func startServer(t *testing.T, kube kubernetes.Interface, ns string, limit int) *Server {
	t.Helper()
	srv := NewServer(kube, ns, limit)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := srv.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return srv
}

// call makes one request as the http backend client does (basic auth, Content-MD5 with a body)
// and returns the status and body.
func call(t *testing.T, method, url, user, password string, body []byte) (int, string, http.Header) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	if body != nil {
		sum := md5.Sum(body)
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header
}

func TestServerProtocol(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	srv := startServer(t, testKube, ns, 2)
	var mu sync.Mutex
	var refused []int
	srv.OnError = func(runID, suffix string, status int, err error) {
		mu.Lock()
		refused = append(refused, status)
		mu.Unlock()
	}
	a, revokeA := srv.IssueRunAs("run-a", "alpha", map[string]string{LabelResource: "alpha"})
	b, revokeB := srv.IssueRun("beta", nil)
	defer revokeB()
	if !strings.HasPrefix(a.Address, "http://127.0.0.1:") || a.LockAddress != a.Address || a.UnlockAddress != a.Address {
		t.Fatalf("addresses %+v", a)
	}
	env := a.Env()
	for _, k := range []string{"TF_HTTP_ADDRESS", "TF_HTTP_LOCK_ADDRESS", "TF_HTTP_UNLOCK_ADDRESS", "TF_HTTP_LOCK_METHOD", "TF_HTTP_UNLOCK_METHOD", "TF_HTTP_USERNAME", "TF_HTTP_PASSWORD", "TF_HTTP_RETRY_MAX"} {
		if env[k] == "" {
			t.Errorf("Env lacks %s", k)
		}
	}

	// Authentication: none, wrong, another state's.
	if st, _, _ := call(t, "GET", a.Address, "", "", nil); st != 401 {
		t.Errorf("no credentials: %d", st)
	}
	if st, _, _ := call(t, "GET", a.Address, a.Username, a.Password+"x", nil); st != 401 {
		t.Errorf("wrong password: %d", st)
	}
	if st, _, _ := call(t, "GET", a.Address, b.Username, b.Password, nil); st != 403 {
		t.Errorf("another run's credentials: %d", st)
	}
	if st, _, _ := call(t, "GET", a.Address, a.Username, a.Password, nil); st != 404 {
		t.Errorf("no state yet: %d", st)
	}

	// LOCK: the lock names the run; a POST without the lock ID is refused with the holder.
	mine := Lock{ID: "aaaaaaaa-0000-4000-8000-000000000001", Operation: "OperationTypeApply", Who: "me@host", Version: "1.11.4"}
	body, _ := json.Marshal(mine)
	if st, out, _ := call(t, LockMethod, a.LockAddress, a.Username, a.Password, body); st != 200 {
		t.Fatalf("LOCK: %d %s", st, out)
	}
	l, _ := inspectLock(ctx, testKube, ns, DefaultWorkspace, "alpha")
	if l == nil || l.Who != "me@host" || l.Info != "conductor-tf run run-a" {
		t.Fatalf("lock recorded as %+v", l)
	}
	if id, ok := RunOfLock(l); !ok || id != "run-a" {
		t.Errorf("RunOfLock = %q, %v", id, ok)
	}
	state := stateJSON(t, "lin-s", 1, map[string]int{"x": 10})
	st, out, _ := call(t, "POST", a.Address, a.Username, a.Password, state)
	var holder Lock
	if st != 423 || json.Unmarshal([]byte(out), &holder) != nil || holder.ID != mine.ID {
		t.Errorf("POST without the lock ID: %d %s", st, out)
	}
	if st, out, _ := call(t, "POST", a.Address+"?ID="+mine.ID, a.Username, a.Password, state); st != 200 {
		t.Fatalf("POST: %d %s", st, out)
	}
	st, out, hdr := call(t, "GET", a.Address, a.Username, a.Password, nil)
	sum := md5.Sum(state)
	if st != 200 || out != string(state) || hdr.Get("Content-MD5") != base64.StdEncoding.EncodeToString(sum[:]) {
		t.Errorf("GET after POST: %d, equal=%v, md5 %q", st, out == string(state), hdr.Get("Content-MD5"))
	}
	s, _ := testKube.CoreV1().Secrets(ns).Get(ctx, "tfstate-default-alpha", metav1.GetOptions{})
	if s.Labels[LabelResource] != "alpha" || s.Labels["tfstate"] != "true" {
		t.Errorf("state Secret labels %v", s.Labels)
	}

	// Refused states: another lineage, an older serial, a body that does not match its MD5.
	if st, out, _ := call(t, "POST", a.Address+"?ID="+mine.ID, a.Username, a.Password, stateJSON(t, "lin-other", 5, nil)); st != 409 || !strings.Contains(out, "lineage") {
		t.Errorf("POST of another lineage: %d %s", st, out)
	}
	if err := NewStore(testKube, ns).For("alpha").Write(ctx, stateJSON(t, "lin-s", 4, nil)); err != nil {
		t.Fatal(err)
	}
	if st, out, _ := call(t, "POST", a.Address+"?ID="+mine.ID, a.Username, a.Password, stateJSON(t, "lin-s", 2, nil)); st != 409 || !strings.Contains(out, "serial") {
		t.Errorf("POST of an older serial: %d %s", st, out)
	}
	req, _ := http.NewRequest("POST", a.Address+"?ID="+mine.ID, bytes.NewReader(state))
	req.SetBasicAuth(a.Username, a.Password)
	req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(make([]byte, 16)))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("POST with a wrong Content-MD5: %v %v", resp.StatusCode, err)
	}

	// Another lock ID is refused with the holder's LockInfo; UNLOCK under another ID too.
	theirs, _ := json.Marshal(Lock{ID: "bbbbbbbb-0000-4000-8000-000000000002", Who: "other@host"})
	st, out, _ = call(t, LockMethod, a.LockAddress, a.Username, a.Password, theirs)
	holder = Lock{}
	if st != 423 || json.Unmarshal([]byte(out), &holder) != nil || holder.Who != "me@host" || holder.ID != mine.ID {
		t.Errorf("LOCK of a held state: %d %s", st, out)
	}
	if st, _, _ := call(t, UnlockMethod, a.UnlockAddress, a.Username, a.Password, theirs); st != 423 {
		t.Errorf("UNLOCK under another ID: %d", st)
	}
	if st, out, _ := call(t, UnlockMethod, a.UnlockAddress, a.Username, a.Password, body); st != 200 {
		t.Errorf("UNLOCK: %d %s", st, out)
	}
	if st, _, _ := call(t, UnlockMethod, a.UnlockAddress, a.Username, a.Password, nil); st != 200 {
		t.Errorf("UNLOCK of an unlocked state: %d", st)
	}
	if l, _ := inspectLock(ctx, testKube, ns, DefaultWorkspace, "alpha"); l != nil {
		t.Errorf("still locked: %+v", l)
	}

	// UNLOCK without a body (terraform's force-unlock) releases only a lock this run took.
	if st, _, _ := call(t, LockMethod, a.LockAddress, a.Username, a.Password, body); st != 200 {
		t.Fatal(st)
	}
	if st, _, _ := call(t, UnlockMethod, a.UnlockAddress, a.Username, a.Password, nil); st != 200 {
		t.Errorf("UNLOCK without a body of the run's own lock: %d", st)
	}
	foreign := Lock{ID: "dddddddd-0000-4000-8000-00000000000d", Who: "ops@laptop"}
	if _, err := acquireFresh(ctx, testKube, ns, DefaultWorkspace, "alpha", nil, foreign); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := call(t, UnlockMethod, a.UnlockAddress, a.Username, a.Password, nil); st != 409 {
		t.Errorf("UNLOCK without a body of someone's lock: %d", st)
	}
	// DELETE: refused under someone's lock and without the run's own; under it the state goes,
	// its last version kept.
	if st, _, _ := call(t, "DELETE", a.Address, a.Username, a.Password, nil); st != 423 {
		t.Errorf("DELETE under someone's lock: %d", st)
	}
	if err := unlockFresh(ctx, testKube, ns, DefaultWorkspace, "alpha", foreign.ID); err != nil {
		t.Fatal(err)
	}
	if st, _, _ := call(t, "DELETE", a.Address, a.Username, a.Password, nil); st != 409 {
		t.Errorf("DELETE without the run's lock: %d, want 409", st)
	}
	if st, _, _ := call(t, LockMethod, a.LockAddress, a.Username, a.Password, body); st != 200 {
		t.Fatal(st)
	}
	if st, _, _ := call(t, "DELETE", a.Address, a.Username, a.Password, nil); st != 200 {
		t.Errorf("DELETE under the run's lock: %d", st)
	}
	if st, _, _ := call(t, "GET", a.Address, a.Username, a.Password, nil); st != 404 {
		t.Errorf("GET after DELETE: %d", st)
	}
	if hist, _ := NewStore(testKube, ns).For("alpha").History(ctx); len(hist) != 2 || hist[0].Serial != 4 {
		t.Errorf("history after DELETE (limit 2): %+v, want serial 4 first", hist)
	}

	revokeA()
	if st, _, _ := call(t, "GET", a.Address, a.Username, a.Password, nil); st != 401 {
		t.Errorf("revoked credentials: %d", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(refused, 409) || !slices.Contains(refused, 403) {
		t.Errorf("OnError saw %v, want the 409s among them", refused)
	}
	if err := srv.Start(context.Background(), "0.0.0.0:0"); err == nil {
		t.Error("Start on a non-loopback address succeeded")
	}
}

// failingKube is a fake clientset whose Secret writes fail while fail is set.
func failingKube() (*fake.Clientset, *atomic.Bool) {
	fk := fake.NewClientset()
	fail := &atomic.Bool{}
	fk.PrependReactor("*", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if fail.Load() && (a.GetVerb() == "create" || a.GetVerb() == "update") && isStateSecret(a) {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	return fk, fail
}

// isStateSecret reports a create or update of a state chunk Secret (tfstate-…): the writes that
// fail in failingKube, while the pending state's own Secret (tfpending-…) can still be written.
func isStateSecret(a k8stesting.Action) bool {
	var obj runtime.Object
	switch a := a.(type) {
	case k8stesting.CreateAction:
		obj = a.GetObject()
	case k8stesting.UpdateAction:
		obj = a.GetObject()
	}
	s, ok := obj.(*corev1.Secret)
	return ok && strings.HasPrefix(s.Name, "tfstate-")
}

func TestServerKeepsStateItCouldNotWrite(t *testing.T) {
	ctx := context.Background()
	fk, fail := failingKube()
	srv := startServer(t, fk, "ns", 5)
	var told atomic.Int32
	srv.OnPending = func(suffix string, state []byte, err error) { told.Add(1) }
	c, revoke := srv.IssueRun("gamma", nil)
	defer revoke()
	lockAs(t, c, "lock-gamma")
	at := c.Address + "?ID=lock-gamma"

	fail.Store(true)
	s1 := stateJSON(t, "lin-p", 1, map[string]int{"x": 10})
	if st, _, _ := call(t, "POST", at, c.Username, c.Password, s1); st != 503 {
		t.Fatalf("POST while writes fail: %d", st)
	}
	if p, ok := srv.Pending("gamma"); !ok || !bytes.Equal(p, s1) || told.Load() != 1 {
		t.Fatalf("pending = %v (equal %v), OnPending called %d times", ok, bytes.Equal(p, s1), told.Load())
	}
	// A GET while writes still fail cannot serve an older state.
	if st, _, _ := call(t, "GET", c.Address, c.Username, c.Password, nil); st != 503 {
		t.Errorf("GET with a pending state while writes fail: %d", st)
	}
	// A newer state replaces the pending one; an older one is refused.
	s2 := stateJSON(t, "lin-p", 2, map[string]int{"x": 10})
	if st, _, _ := call(t, "POST", at, c.Username, c.Password, s2); st != 503 {
		t.Fatalf("second POST while writes fail: %d", st)
	}
	if st, _, _ := call(t, "POST", at, c.Username, c.Password, stateJSON(t, "lin-other", 3, nil)); st != 409 {
		t.Errorf("POST of another lineage than the pending state: %d", st)
	}
	if _, err := srv.RetryPending(ctx, "gamma"); err == nil {
		t.Error("RetryPending while writes fail succeeded")
	}
	fail.Store(false)
	if _, err := srv.RetryPending(ctx, "gamma"); err != nil {
		t.Fatal(err)
	}
	if _, ok := srv.Pending("gamma"); ok {
		t.Error("still pending after RetryPending")
	}
	got, found, err := readStateJSON(ctx, fk, "ns", DefaultWorkspace, "gamma")
	if err != nil || !found || !bytes.Equal(got, s2) {
		t.Fatalf("stored after RetryPending: found=%v err=%v equal=%v", found, err, bytes.Equal(got, s2))
	}

	// A GET flushes a pending state itself once writes work again. (The write back released the
	// lock the pending state kept: the run locks again.)
	lockAs(t, c, "lock-gamma")
	fail.Store(true)
	s3 := stateJSON(t, "lin-p", 3, map[string]int{"x": 10})
	if st, _, _ := call(t, "POST", at, c.Username, c.Password, s3); st != 503 {
		t.Fatal(st)
	}
	fail.Store(false)
	if st, out, _ := call(t, "GET", c.Address, c.Username, c.Password, nil); st != 200 || out != string(s3) {
		t.Errorf("GET after writes recovered: %d, equal %v", st, out == string(s3))
	}
	if _, ok := srv.Pending("gamma"); ok {
		t.Error("still pending after GET")
	}
}

// TestPendingStateOutlivesTheServer: a state that could not be stored is written to its own Secret
// before the run is answered, its lock stays held (UNLOCK refused, revoke leaves it), and a new
// server — a controller restarted after a kill — puts it back and only then releases the lock.
// A pending state that no longer follows the stored one is reported, never written over it.
// Issue 17: before, the pending state lived only in the server's memory, UNLOCK was accepted
// while it was pending, and the flush wrote it whatever was stored.
func TestPendingStateOutlivesTheServer(t *testing.T) {
	ctx := context.Background()
	fk, fail := failingKube()
	first := startServer(t, fk, "ns", 5)
	c, revoke := first.IssueRun("delta", nil)
	lock := `{"ID":"lock-delta","Operation":"OperationTypeApply","Who":"run@pod"}`
	if st, _, _ := call(t, LockMethod, c.LockAddress, c.Username, c.Password, []byte(lock)); st != 200 {
		t.Fatalf("LOCK: %d", st)
	}
	fail.Store(true)
	s1 := stateJSON(t, "lin-d", 1, map[string]int{"x": 1})
	if st, _, _ := call(t, "POST", c.Address+"?ID=lock-delta", c.Username, c.Password, s1); st != 503 {
		t.Fatalf("POST while state writes fail: %d", st)
	}
	if _, err := fk.CoreV1().Secrets("ns").Get(ctx, PendingSecretName(DefaultWorkspace, "delta"), metav1.GetOptions{}); err != nil {
		t.Fatalf("the pending state is not in its Secret: %v", err)
	}
	if st, _, _ := call(t, UnlockMethod, c.UnlockAddress, c.Username, c.Password, []byte(lock)); st != 503 {
		t.Errorf("UNLOCK while the state is pending: %d, want 503 (the lock stays)", st)
	}
	revoke()
	if l, err := inspectLock(ctx, fk, "ns", DefaultWorkspace, "delta"); err != nil || l == nil || l.ID != "lock-delta" {
		t.Fatalf("lock after revoking a run whose state is pending: %+v, %v; want lock-delta held", l, err)
	}

	// The controller is killed; the next one starts a new server.
	fail.Store(false)
	second := startServer(t, fk, "ns", 5)
	saved, err := second.RetryPending(ctx, "delta")
	if err != nil || !saved {
		t.Fatalf("RetryPending on a new server: saved=%v, %v", saved, err)
	}
	if got, found, err := readStateJSON(ctx, fk, "ns", DefaultWorkspace, "delta"); err != nil || !found || !bytes.Equal(got, s1) {
		t.Fatalf("stored after the restart: found=%v %v equal=%v", found, err, bytes.Equal(got, s1))
	}
	if l, err := inspectLock(ctx, fk, "ns", DefaultWorkspace, "delta"); err != nil || l != nil {
		t.Errorf("lock after the pending state was saved: %+v, %v; want released", l, err)
	}
	if _, err := fk.CoreV1().Secrets("ns").Get(ctx, PendingSecretName(DefaultWorkspace, "delta"), metav1.GetOptions{}); err == nil {
		t.Error("the pending state's Secret is still there after it was saved")
	}

	// Issue 64: a pending state older than what is stored now (a run that started after it wrote
	// serial 5) is never written over it, nor left stuck when the stored state records every
	// resource it does: it is discarded, kept in the history under its serial, its Secret deleted.
	// Before, RetryPending refused it with a *ConflictError on every call, its Secret stayed, and
	// the resource stopped with StateNotSaved until a person deleted it.
	h := NewStore(fk, "ns").For("delta")
	h.store.HistoryLimit = 5
	if err := h.Write(ctx, stateJSON(t, "lin-d", 5, map[string]int{"x": 5})); err != nil {
		t.Fatal(err)
	}
	if err := savePending(ctx, h, stateJSON(t, "lin-d", 2, map[string]int{"x": 2}), "lock-old"); err != nil {
		t.Fatal(err)
	}
	third := startServer(t, fk, "ns", 5)
	var discarded *PendingDiscardedError
	if _, err := third.RetryPending(ctx, "delta"); !errors.As(err, &discarded) {
		t.Fatalf("flush of a pending state older than the stored one: %v, want a *PendingDiscardedError", err)
	}
	if !discarded.KeptInHistory || discarded.Discarded.Serial != 2 || discarded.Stored.Serial != 5 {
		t.Errorf("discarded: %+v; want serial 2 kept in history over stored 5", discarded)
	}
	if st, _, _ := readStatus(ctx, fk, "ns", DefaultWorkspace, "delta", nil); st.Serial != 5 {
		t.Errorf("stored serial after the discard: %d, want 5", st.Serial)
	}
	if _, err := fk.CoreV1().Secrets("ns").Get(ctx, PendingSecretName(DefaultWorkspace, "delta"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the discarded pending state's Secret: %v; want it deleted", err)
	}
	if _, err := h.Version(ctx, 2); err != nil {
		t.Errorf("the discarded state is not in the history: %v", err)
	}
	if saved, err := third.RetryPending(ctx, "delta"); err != nil || saved {
		t.Errorf("after the discard: saved=%v, %v; want nothing pending", saved, err)
	}

	// One that records a resource the stored state does not is kept: discarded, the next run
	// would create that object again.
	if err := savePending(ctx, h, stateJSON(t, "lin-d", 3, map[string]int{"x": 3, "orphan": 3}), "lock-old"); err != nil {
		t.Fatal(err)
	}
	var held *PendingHeldError
	if _, err := startServer(t, fk, "ns", 5).RetryPending(ctx, "delta"); !errors.As(err, &held) ||
		!reflect.DeepEqual(held.Only, []string{"terraform_data.orphan"}) {
		t.Fatalf("flush of an older pending state with a resource the stored one lacks: %v; want a *PendingHeldError naming terraform_data.orphan", err)
	}
	if _, err := fk.CoreV1().Secrets("ns").Get(ctx, PendingSecretName(DefaultWorkspace, "delta"), metav1.GetOptions{}); err != nil {
		t.Errorf("the held pending state was not kept: %v", err)
	}
	if err := deletePending(ctx, h); err != nil {
		t.Fatal(err)
	}

	// One of another lineage is another state: it stays pending, refused with a *ConflictError.
	if err := savePending(ctx, h, stateJSON(t, "lin-other", 9, nil), ""); err != nil {
		t.Fatal(err)
	}
	fourth := startServer(t, fk, "ns", 5)
	var conflict *ConflictError
	if _, err := fourth.RetryPending(ctx, "delta"); !errors.As(err, &conflict) {
		t.Fatalf("flush of a pending state of another lineage: %v, want a *ConflictError", err)
	}
	if _, err := fk.CoreV1().Secrets("ns").Get(ctx, PendingSecretName(DefaultWorkspace, "delta"), metav1.GetOptions{}); err != nil {
		t.Errorf("the pending state of another lineage was not kept: %v", err)
	}
}

// TestRevokeReleasesTheRunsLocks: a run that ends without its UNLOCK (killed, cancelled) leaves
// no lock once its credentials are revoked; another's lock is left alone. Issue 17: before,
// revoking the credentials left the lock for recovery, which trusted user@host.
//
// On the real API server: the server updates a Lease it wrote from its own copy, guarded by the
// resourceVersion, which the fake clientset does not check.
func TestRevokeReleasesTheRunsLocks(t *testing.T) {
	ctx := context.Background()
	fk, ns := testKube, newNamespace(t)
	srv := startServer(t, fk, ns, 0)
	c, revoke := srv.IssueRun("eps", nil)
	if st, _, _ := call(t, LockMethod, c.LockAddress, c.Username, c.Password, []byte(`{"ID":"run-lock","Who":"x@y"}`)); st != 200 {
		t.Fatalf("LOCK: %d", st)
	}
	revoke()
	if l, err := inspectLock(ctx, fk, ns, DefaultWorkspace, "eps"); err != nil || l != nil {
		t.Fatalf("lock after revoke: %+v, %v; want none", l, err)
	}
	// A lock someone else took after the run is not the run's to release.
	c2, revoke2 := srv.IssueRun("eps", nil)
	if st, _, _ := call(t, LockMethod, c2.LockAddress, c2.Username, c2.Password, []byte(`{"ID":"second","Who":"x@y"}`)); st != 200 {
		t.Fatalf("LOCK: %d", st)
	}
	if err := unlockFresh(ctx, fk, ns, DefaultWorkspace, "eps", "second"); err != nil {
		t.Fatal(err)
	}
	if _, err := acquireFresh(ctx, fk, ns, DefaultWorkspace, "eps", nil, Lock{ID: "person", Who: "alice@laptop"}); err != nil {
		t.Fatal(err)
	}
	revoke2()
	if l, _ := inspectLock(ctx, fk, ns, DefaultWorkspace, "eps"); l == nil || l.ID != "person" {
		t.Errorf("a person's lock after another run's revoke: %+v; want it kept", l)
	}
}
