package main

import (
	"context"
	"errors"
	"testing"
	"time"

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
