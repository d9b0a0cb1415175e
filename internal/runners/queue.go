package runners

import (
	"context"
	"sync"
)

// queue holds the runs waiting for a runner of one pool, served across tenants in turn (the
// claim's namespace; "" for static resources), as the in-process pool's fair slots serve them: a
// tenant with many waiting runs does not starve one with a few.
type queue struct {
	mu      sync.Mutex
	tenants []string          // tenants with waiting runs, in turn order
	waiting map[string][]*job // by tenant, oldest first
	next    int               // index into tenants of the tenant served next
	idle    int               // runners waiting for a run
	wake    chan struct{}     // closed and replaced when a run is added
}

func newQueue() *queue {
	return &queue{waiting: map[string][]*job{}, wake: make(chan struct{})}
}

// push adds j at the end of its tenant's line (front: at its head, for a run given back before it
// started). It returns j's place among all waiting runs (1 = next) and how many wait, and whether
// a runner was idle to take it at once.
func (q *queue) push(j *job, front bool) (position, waiting int, idle bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.waiting[j.tenant]; !ok {
		q.tenants = append(q.tenants, j.tenant)
	}
	if front {
		q.waiting[j.tenant] = append([]*job{j}, q.waiting[j.tenant]...)
	} else {
		q.waiting[j.tenant] = append(q.waiting[j.tenant], j)
	}
	for _, js := range q.waiting {
		waiting += len(js)
	}
	idle = q.idle > 0
	close(q.wake)
	q.wake = make(chan struct{})
	return waiting, waiting, idle
}

// take waits until a run is waiting, or ctx is done, and removes the next one in turn.
func (q *queue) take(ctx context.Context) (*job, error) {
	q.mu.Lock()
	q.idle++
	defer func() {
		q.mu.Lock()
		q.idle--
		q.mu.Unlock()
	}()
	for {
		if j := q.popLocked(); j != nil {
			q.mu.Unlock()
			return j, nil
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		q.mu.Lock()
	}
}

func (q *queue) popLocked() *job {
	if len(q.tenants) == 0 {
		return nil
	}
	if q.next >= len(q.tenants) {
		q.next = 0
	}
	t := q.tenants[q.next]
	js := q.waiting[t]
	j := js[0]
	if len(js) == 1 {
		delete(q.waiting, t)
		q.tenants = append(q.tenants[:q.next], q.tenants[q.next+1:]...)
	} else {
		q.waiting[t] = js[1:]
		q.next++
	}
	return j
}

// remove takes j out of the line; false when a runner took it already.
func (q *queue) remove(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	js := q.waiting[j.tenant]
	for i, w := range js {
		if w != j {
			continue
		}
		if len(js) == 1 {
			delete(q.waiting, j.tenant)
			for k, t := range q.tenants {
				if t == j.tenant {
					q.tenants = append(q.tenants[:k], q.tenants[k+1:]...)
					if q.next > k {
						q.next--
					}
					break
				}
			}
		} else {
			q.waiting[j.tenant] = append(js[:i:i], js[i+1:]...)
		}
		return true
	}
	return false
}
