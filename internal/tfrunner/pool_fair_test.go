package tfrunner

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
)

// TestFairShare: with both slots busy and 300 runs of namespace a waiting, a run of namespace b
// queued last is told it is second in line and starts within the next two runs, not after the 300.
// The pool is real; the runs' work is a sleep (this tests the pool's decision, not Terraform).
func TestFairShare(t *testing.T) {
	p, err := NewPool(PoolOptions{Dir: t.TempDir(), MaxConcurrent: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var mu sync.Mutex
	var order []string
	run := func(key, tenant string, queued func(int, int)) {
		err := p.do(ctx, key, tenant, queued, func(*Workspace) error {
			mu.Lock()
			order = append(order, tenant+"/"+key)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	}
	// Hold both slots until every run of a is queued.
	hold := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.do(ctx, fmt.Sprintf("holder-%d", i), "a", nil, func(*Workspace) error { <-hold; return nil })
		}()
	}
	waitFor(t, func() bool { return p.slots.Free() == 0 })
	for i := range 300 {
		wg.Add(1)
		go func() { defer wg.Done(); run(fmt.Sprintf("r-%d", i), "a", nil) }()
	}
	waitFor(t, func() bool { return p.slots.Waiting() == 300 })
	defer func(d time.Duration) { queue.QueuedAfter = d }(queue.QueuedAfter)
	queue.QueuedAfter = 10 * time.Millisecond
	var pos, waiting atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		run("late", "b", func(position, n int) { pos.Store(int64(position)); waiting.Store(int64(n)) })
	}()
	waitFor(t, func() bool { return pos.Load() != 0 })
	close(hold)
	wg.Wait()

	at := -1
	for i, o := range order {
		if o == "b/late" {
			at = i
		}
	}
	if at < 0 || at > 2 {
		t.Errorf("namespace b's run started as run %d of %d, want within the first 3 after it was queued", at+1, len(order))
	}
	if pos.Load() != 2 || waiting.Load() != 301 {
		t.Errorf("b's place in line = %d of %d, want 2 of 301", pos.Load(), waiting.Load())
	}
}

// TestShortWaitIsNotQueued: a run that waits less than QueuedAfter for a slot is never told its
// place in line (the controller writes nothing for it); one that waits longer is told once.
func TestShortWaitIsNotQueued(t *testing.T) {
	defer func(d time.Duration) { queue.QueuedAfter = d }(queue.QueuedAfter)
	queue.QueuedAfter = 300 * time.Millisecond
	p, err := NewPool(PoolOptions{Dir: t.TempDir(), MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		hold  time.Duration
		calls int64
	}{{20 * time.Millisecond, 0}, {900 * time.Millisecond, 1}} {
		hold := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = p.do(ctx, "holder", "a", nil, func(*Workspace) error { <-hold; return nil })
		}()
		waitFor(t, func() bool { return p.slots.Free() == 0 })
		var calls atomic.Int64
		go func() { time.Sleep(tc.hold); close(hold) }()
		if err := p.do(ctx, "waiter", "b", func(int, int) { calls.Add(1) }, func(*Workspace) error { return nil }); err != nil {
			t.Fatal(err)
		}
		<-done
		if calls.Load() != tc.calls {
			t.Errorf("a run that waited about %s was told its place %d times, want %d", tc.hold, calls.Load(), tc.calls)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
