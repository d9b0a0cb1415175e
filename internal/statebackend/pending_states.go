package statebackend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
)

// pendingState is a state received but not written, with the labels of the run that sent it and
// the lock ID that run held.
type pendingState struct {
	state  []byte
	labels map[string]string
	lockID string
}

// pendingStates are the states a Server received and could not write yet (pending.go), by suffix:
// in memory, each also in its pending Secret, and, after a restart, listed back from those Secrets
// once (load). Its mutex guards its maps only and is never held across a request to the API
// server; writing or dropping a state's pending state is done in that state's turn (stateTurns).
type pendingStates struct {
	store *Store
	// notify is told of every state kept (keep): the suffix, the state, and why it is pending.
	notify func(suffix string, state []byte, err error)

	mu       sync.Mutex
	bySuffix map[string]pendingState
	// gen counts the times the listing was made stale (relist); listed is the gen of the last
	// listing into bySuffix (load), -1 before the first.
	gen, listed int
	// undecoded holds, by suffix, the pending Secrets that did not decode when listed.
	undecoded map[string]error
}

// newPendingStates returns the pending states of store, none in memory and none listed yet.
func newPendingStates(store *Store, notify func(suffix string, state []byte, err error)) *pendingStates {
	return &pendingStates{store: store, notify: notify, bySuffix: map[string]pendingState{}, listed: -1}
}

// relist makes the next load list the pending Secrets again: with sharding, a replica that takes
// a bucket must see the pending states saved by its last holder since this one listed.
func (p *pendingStates) relist() {
	p.mu.Lock()
	p.gen++
	p.mu.Unlock()
}

// forget drops from memory (not from their Secrets) the pending states whose run's labels match
// accepts: those of the buckets a replica lost, which their new owner keeps or writes from their
// Secrets; a stale copy here must not be written over a newer state if the bucket comes back.
func (p *pendingStates) forget(match func(labels map[string]string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for sfx, ps := range p.bySuffix {
		if match(ps.labels) {
			delete(p.bySuffix, sfx)
		}
	}
}

// where returns the suffixes of the pending states in memory whose run's labels match accepts.
func (p *pendingStates) where(match func(labels map[string]string) bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for sfx, ps := range p.bySuffix {
		if match(ps.labels) {
			out = append(out, sfx)
		}
	}
	return out
}

// load puts the pending states a previous process of the controller (or, with sharding, the last
// holder of a bucket) left in their Secrets into memory: the first call after a start or a relist
// lists them all (one request, labelled LabelPendingState), instead of reading one Secret per
// state. It is first called by the leader's first reconcile that runs anything, after any earlier
// leader stopped serving. A state already pending in memory is kept.
//
// It returns the error of listing, or the error of suffix's own pending Secret when that did not
// decode: such a Secret stops only its own state.
func (p *pendingStates) load(ctx context.Context, suffix string) error {
	p.mu.Lock()
	gen, listed, bad := p.gen, p.listed, p.undecoded[suffix]
	p.mu.Unlock()
	if listed == gen {
		return bad
	}
	found, undecoded, err := p.store.listPending(ctx)
	if err != nil {
		return fmt.Errorf("listing pending states: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listed >= gen {
		return p.undecoded[suffix]
	}
	p.undecoded = undecoded
	for sfx, ps := range found {
		if _, inMemory := p.bySuffix[sfx]; !inMemory {
			p.bySuffix[sfx] = ps
		}
	}
	p.listed = gen // a relist since this listing began lists again next time
	return p.undecoded[suffix]
}

// get returns the pending state of suffix in memory (its state shared, not copied), if any.
func (p *pendingStates) get(suffix string) (pendingState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, ok := p.bySuffix[suffix]
	return ps, ok
}

// has reports whether suffix has a pending state in memory.
func (p *pendingStates) has(suffix string) bool {
	_, ok := p.get(suffix)
	return ok
}

// keep records state, sent by a run holding lockID, as h's pending state: in memory, then in its
// Secret (before the run is answered), and tells notify, with err (why it is pending) and, when
// the Secret could not be written, why not.
func (p *pendingStates) keep(ctx context.Context, h *Handle, state []byte, lockID string, err error) {
	p.mu.Lock()
	p.bySuffix[h.suffix] = pendingState{state: bytes.Clone(state), labels: h.labels, lockID: lockID}
	p.mu.Unlock()
	if serr := savePending(ctx, h, state, lockID); serr != nil {
		err = fmt.Errorf("%w; and it could not be saved to %s either, so only this process keeps it: %v", err,
			PendingSecretName(h.workspace, h.suffix), serr)
	}
	if p.notify != nil {
		p.notify(h.suffix, bytes.Clone(state), err)
	}
}

// drop forgets h's pending state, in its Secret, then in memory. It returns the API server's error
// of deleting the Secret (the state is then still pending).
func (p *pendingStates) drop(ctx context.Context, h *Handle) error {
	if err := deletePending(ctx, h); err != nil {
		return fmt.Errorf("deleting the saved pending state: %w", err)
	}
	p.mu.Lock()
	delete(p.bySuffix, h.suffix)
	p.mu.Unlock()
	return nil
}

// flush writes h's pending state, if any, over the stored one (writePending: a *ConflictError when
// it does not follow a readable stored state), then drops it and releases the lock of the run that
// sent it (a lock held under another ID by now is left). It reports whether a pending state was
// written. One the stored state moved past is discarded instead (a *PendingDiscardedError,
// pending_discard.go). Call it in the state's turn (see Server.RetryPending).
func (p *pendingStates) flush(ctx context.Context, h *Handle) (bool, error) {
	if err := p.load(ctx, h.suffix); err != nil {
		return false, err
	}
	ps, ok := p.get(h.suffix)
	if !ok {
		return false, nil
	}
	if len(ps.labels) > 0 {
		h = h.WithLabels(ps.labels)
	}
	if err := writePending(ctx, h, ps.state); err != nil {
		if conflict, ok := discardable(err); ok {
			return false, p.discard(ctx, h, ps, conflict) // the stored state moved on (pending_discard.go)
		}
		return false, fmt.Errorf("writing the state received earlier, which could not be written then: %w", err)
	}
	if err := p.drop(ctx, h); err != nil {
		return true, err
	}
	if ps.lockID != "" {
		// The lock stayed held while the state was pending; the run that took it has ended.
		var locked *LockedError
		if err := h.Unlock(ctx, ps.lockID); err != nil && !errors.As(err, &locked) {
			return true, fmt.Errorf("releasing lock %s after saving the pending state: %w", ps.lockID, err)
		}
	}
	return true, nil
}
