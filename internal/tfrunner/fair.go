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
	mu    sync.Mutex
	free  int
	queue map[string][]*waiter
	// ring is the order tenants with waiting runs are served in; next is the index of the tenant
	// served next.
	ring []string
	next int
}

type waiter struct {
	tenant string
	ready  chan struct{}
}

func newFairSlots(n int) *fairSlots {
	return &fairSlots{free: n, queue: map[string][]*waiter{}}
}

// acquire takes a slot for a run of tenant, waiting in turn until one is free or ctx is done.
// queued is called (without the lock held) with the run's place in line (1 = next) when it must
// wait. It returns ctx.Err() when ctx ends first; the slot is then not held.
func (f *fairSlots) acquire(ctx context.Context, tenant string, queued func(position, waiting int)) error {
	f.mu.Lock()
	if f.free > 0 && len(f.ring) == 0 {
		f.free--
		f.mu.Unlock()
		return nil
	}
	w := &waiter{tenant: tenant, ready: make(chan struct{})}
	if len(f.queue[tenant]) == 0 {
		f.ring = append(f.ring, tenant)
	}
	f.queue[tenant] = append(f.queue[tenant], w)
	pos, total := f.positionLocked(w), f.waitingLocked()
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
			f.removeLocked(w)
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
	if len(f.ring) == 0 {
		f.free++
		return
	}
	if f.next >= len(f.ring) {
		f.next = 0
	}
	tenant := f.ring[f.next]
	q := f.queue[tenant]
	w := q[0]
	if len(q) == 1 {
		delete(f.queue, tenant)
		f.ring = append(f.ring[:f.next], f.ring[f.next+1:]...)
	} else {
		f.queue[tenant] = q[1:]
		f.next++
	}
	close(w.ready)
}

func (f *fairSlots) removeLocked(w *waiter) {
	q := f.queue[w.tenant]
	for i, x := range q {
		if x == w {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) > 0 {
		f.queue[w.tenant] = q
		return
	}
	delete(f.queue, w.tenant)
	for i, t := range f.ring {
		if t == w.tenant {
			f.ring = append(f.ring[:i], f.ring[i+1:]...)
			if i < f.next {
				f.next--
			}
			break
		}
	}
}

// positionLocked is w's place in line (1 = served next) if no other run arrives: the round robin
// played forward over the ring from next, w being the k-th waiting run of its tenant.
func (f *fairSlots) positionLocked(w *waiter) int {
	k := 0
	for i, x := range f.queue[w.tenant] {
		if x == w {
			k = i
			break
		}
	}
	pos := 0
	for round := 0; round <= k; round++ {
		for j := range f.ring {
			t := f.ring[(f.next+j)%len(f.ring)]
			if len(f.queue[t]) > round {
				pos++
				if t == w.tenant && round == k {
					return pos
				}
			}
		}
	}
	return pos
}

func (f *fairSlots) waitingLocked() int {
	n := 0
	for _, q := range f.queue {
		n += len(q)
	}
	return n
}
