package main

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// stubLock is a resourcelock.Interface whose writes fail while fail is set.
type stubLock struct {
	resourcelock.Interface
	fail bool
}

func (s *stubLock) Identity() string { return "me_1" }
func (s *stubLock) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return s.err()
}
func (s *stubLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return s.err()
}
func (s *stubLock) err() error {
	if s.fail {
		return errors.New("timeout")
	}
	return nil
}

// The leader clock leads only within the deadline of its last successful write naming itself:
// not before any, not after a write naming another holder (a release), and not once renewals
// have failed for longer than the deadline.
func TestLeaderClock(t *testing.T) {
	stub := &stubLock{}
	l := &leaderClock{Interface: stub, deadline: 200 * time.Millisecond}
	ctx := context.Background()
	if l.Leading() {
		t.Fatal("leading before taking the Lease")
	}
	if err := l.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me_1"}); err != nil || !l.Leading() {
		t.Fatalf("after taking the Lease: leading %v, %v", l.Leading(), err)
	}
	stub.fail = true
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me_1"})
	if !l.Leading() {
		t.Error("one failed renewal within the deadline ended the leadership")
	}
	time.Sleep(250 * time.Millisecond)
	if l.Leading() {
		t.Error("still leading after renewals failed past the deadline")
	}
	stub.fail = false
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me_1"})
	if !l.Leading() {
		t.Error("a successful renewal did not restore the leadership")
	}
	_ = l.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: ""})
	if l.Leading() {
		t.Error("leading after releasing the Lease")
	}
	if !lostLeadership(errors.New("leader election lost")) || lostLeadership(nil) || lostLeadership(errors.New("context canceled")) {
		t.Error("lostLeadership misreads the manager's errors")
	}
}

// heldLock is a resourcelock.Interface whose Lease names holder, renewed at each Get.
type heldLock struct {
	stubLock
	holder string
}

func (h *heldLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: h.holder, LeaseDurationSeconds: 15, RenewTime: metav1.Now()}, nil, nil
}

// Issue 64 item 4: a standby names the leader's pod IP at the run protocol's port, from the holder
// of the Lease as it last read it; never itself, nor a predecessor in its own pod (dead: this
// container replaced it), nor a holder that stopped renewing.
func TestLeaderAddressNamesTheHolderPod(t *testing.T) {
	kube := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mgr-a"}, Status: corev1.PodStatus{PodIP: "10.0.0.7"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mgr-b"}, Status: corev1.PodStatus{PodIP: "10.0.0.8"}})
	lock := &heldLock{}
	clock := &leaderClock{Interface: lock, deadline: time.Second}
	a := &leaderAddress{clock: clock, pods: kube.CoreV1().Pods("ns"), pod: "mgr-b", port: "9443"}
	read := func(holder string) string {
		lock.holder = holder
		if _, _, err := clock.Get(context.Background()); err != nil {
			t.Fatal(err)
		}
		return a.Leader()
	}
	if got := a.Leader(); got != "" {
		t.Errorf("before any read of the Lease: %q", got)
	}
	if got := read("mgr-a_1f"); got != "10.0.0.7:9443" {
		t.Errorf("holder mgr-a: %q; want 10.0.0.7:9443", got)
	}
	if got := read("mgr-b_2e"); got != "" {
		t.Errorf("holder a predecessor in this pod: %q; want none", got)
	}
	if got := read("me_1"); got != "" {
		t.Errorf("holder this process: %q; want none", got)
	}
	if got := read("mgr-c_3d"); got != "" {
		t.Errorf("holder whose pod is gone: %q; want none", got)
	}
	read("mgr-a_1f")
	clock.mu.Lock()
	clock.seen = time.Now().Add(-16 * time.Second)
	clock.mu.Unlock()
	if got := a.Leader(); got != "" {
		t.Errorf("a holder silent for longer than its lease: %q; want none", got)
	}
}
