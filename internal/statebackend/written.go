package statebackend

import "sync"

// writtenStates are, by suffix, the serial, lineage, resource count and Secret name of the state
// last stored through the server (a run's POST), until the controller takes it (Server.TakeWritten)
// or the state is deleted (a run's DELETE).
type writtenStates struct {
	mu       sync.Mutex
	bySuffix map[string]State
}

// newWrittenStates returns an empty set.
func newWrittenStates() *writtenStates { return &writtenStates{bySuffix: map[string]State{}} }

// put records st as the state last stored for suffix.
func (w *writtenStates) put(suffix string, st State) {
	w.mu.Lock()
	w.bySuffix[suffix] = st
	w.mu.Unlock()
}

// take returns the state last stored for suffix and forgets it; false when none was since.
func (w *writtenStates) take(suffix string) (State, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st, ok := w.bySuffix[suffix]
	delete(w.bySuffix, suffix)
	return st, ok
}

// forget drops what was recorded for suffix.
func (w *writtenStates) forget(suffix string) {
	w.mu.Lock()
	delete(w.bySuffix, suffix)
	w.mu.Unlock()
}
