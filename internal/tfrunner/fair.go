package tfrunner

import (
	"context"
	"sync"
)

// fairSlots bounds the runs executing at once and serves the runs waiting for a slot across
// tenants (the controller passes the claim's namespace) in turn: one waiting run of each tenant,
// then the next, round robin, first come first served within a tenant. So 500 runs queued by one
// namespace delay a run of another namespace by at most one run per other waiting tenant, not 500
// (the fair sharing Kubernetes' API Priority and Fairness applies to requests, with one queue per
// flow).
type fairSlots struct {
	mu   sync.Mutex
	free int
	line FairLine[*waiter]
}

type waiter struct {
	tenant string
	ready  chan struct{}
}

func newFairSlots(n int) *fairSlots {
	return &fairSlots{free: n}
}

// acquire takes a slot for a run of tenant, waiting in turn until one is free or ctx is done.
// queued is called (without the lock held) with the run's place in line (1 = next) when it must
// wait. It returns ctx.Err() when ctx ends first; the slot is then not held.
func (f *fairSlots) acquire(ctx context.Context, tenant string, queued func(position, waiting int)) error {
	f.mu.Lock()
	if f.free > 0 && f.line.Len() == 0 {
		f.free--
		f.mu.Unlock()
		return nil
	}
	w := &waiter{tenant: tenant, ready: make(chan struct{})}
	f.line.Push(tenant, w, false)
	pos, total := f.line.Position(tenant, w), f.line.Len()
	f.mu.Unlock()
	if queued != nil {
		queued(pos, total)
	}
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

// release gives a slot back: to the next waiting run in turn, or to the free pool.
func (f *fairSlots) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked()
}

func (f *fairSlots) releaseLocked() {
	w, ok := f.line.Pop()
	if !ok {
		f.free++
		return
	}
	close(w.ready)
}
