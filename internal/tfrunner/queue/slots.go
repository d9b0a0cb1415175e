package queue

import (
	"context"
	"sync"
	"time"
)

// QueuedAfter is how long a run waits in line before its Events sink is told its place (Queued): a shorter
// wait is not worth a status write (the controller records the place in line as a condition).
var QueuedAfter = 2 * time.Second

// NotifyQueued calls queued with position() once the run has waited QueuedAfter without ready
// being closed, and returns when ready is closed or ctx is done. position is called without any
// lock of the caller's held by this function; queued may be nil.
func NotifyQueued(ctx context.Context, ready <-chan struct{}, position func() (int, int), queued func(position, waiting int)) {
	if queued == nil {
		return
	}
	t := time.NewTimer(QueuedAfter)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
	case <-t.C:
		if pos, waiting := position(); pos > 0 {
			queued(pos, waiting)
		}
	}
}

// Slots bounds the runs executing at once and serves the runs waiting for a slot across
// tenants (the controller passes the claim's namespace) in turn: one waiting run of each tenant,
// then the next, round robin, first come first served within a tenant. So 500 runs queued by one
// namespace delay a run of another namespace by at most one run per other waiting tenant, not 500
// (the fair sharing Kubernetes' API Priority and Fairness applies to requests, with one queue per
// flow).
type Slots struct {
	mu   sync.Mutex
	free int
	line FairLine[*waiter]
}

type waiter struct {
	tenant string
	ready  chan struct{}
}

// NewSlots returns Slots with n slots (n ≤ 0: none free until one is released).
func NewSlots(n int) *Slots {
	return &Slots{free: max(n, 0)}
}

// Free is the number of slots no run holds.
func (f *Slots) Free() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.free
}

// Waiting is the number of runs waiting in line for a slot.
func (f *Slots) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.line.Len()
}

// Acquire takes a slot for a run of tenant, waiting in turn until one is free or ctx is done.
// queued is called (without the lock held) with the run's place in line (1 = next) once it has
// waited QueuedAfter. It returns ctx.Err() when ctx ends first; the slot is then not held.
func (f *Slots) Acquire(ctx context.Context, tenant string, queued func(position, waiting int)) error {
	f.mu.Lock()
	if f.free > 0 && f.line.Len() == 0 {
		f.free--
		f.mu.Unlock()
		return nil
	}
	w := &waiter{tenant: tenant, ready: make(chan struct{})}
	f.line.Push(tenant, w, false)
	f.mu.Unlock()
	NotifyQueued(ctx, w.ready, func() (int, int) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.line.Position(tenant, w), f.line.Len()
	}, queued)
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		select {
		case <-w.ready: // handed a slot as ctx ended: give it to the next one
			f.releaseLocked()
		default:
			f.line.Remove(tenant, w)
		}
		return ctx.Err()
	}
}

// Release gives a slot back: to the next waiting run in turn, or to the free pool.
func (f *Slots) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked()
}

func (f *Slots) releaseLocked() {
	w, ok := f.line.Pop()
	if !ok {
		f.free++
		return
	}
	close(w.ready)
}
