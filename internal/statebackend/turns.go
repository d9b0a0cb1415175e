package statebackend

import "sync"

// stateTurns serializes the work on each state: one request of a run, one RetryPending, one
// KeepErrored or one revoke's lock release at a time per suffix, each finished before the next
// starts (a write of several chunks cut off half-way would leave the state unreadable). The
// mutexes are made on first use and kept for the process's life (one per state served).
type stateTurns struct {
	mu       sync.Mutex
	bySuffix map[string]*sync.Mutex
}

// newStateTurns returns turns with no state taken yet.
func newStateTurns() *stateTurns { return &stateTurns{bySuffix: map[string]*sync.Mutex{}} }

// take waits for and holds the turn of the state suffix; the returned func releases it.
func (t *stateTurns) take(suffix string) (release func()) {
	t.mu.Lock()
	m := t.bySuffix[suffix]
	if m == nil {
		m = &sync.Mutex{}
		t.bySuffix[suffix] = m
	}
	t.mu.Unlock()
	m.Lock()
	return m.Unlock
}
