package runners

import (
	"context"
	"sync"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
)

// poolLine holds the runs waiting for a runner of one pool, served across tenants in turn (the
// claim's namespace; "" for static resources) by a queue.FairLine, as the in-process pool
// serves its slots: a tenant with many waiting runs does not starve one with a few.
type poolLine struct {
	mu   sync.Mutex
	line queue.FairLine[*job]
	idle int           // runners waiting for a run
	wake chan struct{} // closed and replaced when a run is added
}

func newPoolLine() *poolLine { return &poolLine{wake: make(chan struct{})} }

// push adds j at the end of its tenant's line. It returns j's place in line (1 = next), how many
// wait, and whether a runner was idle to take it at once.
func (q *poolLine) push(j *job) (position, waiting int, idle bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.line.Push(j.tenant, j, false)
	q.wakeLocked()
	return q.line.Position(j.tenant, j), q.line.Len(), q.idle > 0
}

// position is j's place in line and how many wait; 0 once a runner took it.
func (q *poolLine) position(j *job) (int, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.line.Position(j.tenant, j), q.line.Len()
}

// giveBack puts j, taken by a runner that could not be sent it, back at the head of its tenant's
// line; false when its caller withdrew it meanwhile (remove found it taken), and nobody waits.
func (q *poolLine) giveBack(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if j.withdrawn {
		return false
	}
	q.line.Push(j.tenant, j, true)
	q.wakeLocked()
	return true
}

// handBack returns j, taken by a runner that did not start it (refused, or it could not be sent),
// to the head of its tenant's line for the next runner; a run its caller withdrew meanwhile ends
// there as cancelled, nothing of it having run.
func (q *poolLine) handBack(j *job) {
	if !q.giveBack(j) {
		j.err = context.Canceled
		close(j.done)
	}
}

func (q *poolLine) wakeLocked() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// take waits until a run is waiting, or ctx is done, and removes the next one in turn.
func (q *poolLine) take(ctx context.Context) (*job, error) {
	q.mu.Lock()
	q.idle++
	defer func() {
		q.mu.Lock()
		q.idle--
		q.mu.Unlock()
	}()
	for {
		if j, ok := q.line.Pop(); ok {
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

// remove takes j out of the line; false when a runner took it already, and j is then marked
// withdrawn, so that giveBack does not put it back.
func (q *poolLine) remove(j *job) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.line.Remove(j.tenant, j) {
		return true
	}
	j.withdrawn = true
	return false
}
