package statebackend

import (
	"context"
	"errors"
	"fmt"
)

// ErroredStateRefusedError is an errored state refused because it is not known to come from the
// run holding the state's lock: its run is unknown to this server, or its lock is no longer the
// one the Lease stores. The state is not kept; the caller drops it (Router) and reports it.
type ErroredStateRefusedError struct {
	RunID  string
	Reason string
}

// Error says which run's errored state was refused, and why.
func (e *ErroredStateRefusedError) Error() string {
	return fmt.Sprintf("the errored state of run %q is refused: %s", e.RunID, e.Reason)
}

// KeepErrored keeps the state run runID could not send to the server — Terraform's
// errored.tfstate, left in the run's workspace or carried back in a runner's Result, tagged with
// the run that produced it (never a later run's ID) — as its state's pending state, at once: in
// memory and in its pending Secret (so that it outlives this process), to be written back by
// RetryPending before anything else runs on that state. The lock the run holds stays held until
// the state is saved.
//
// First, the server must lead or serve the run's share (Leading, Serves); else errNotLeading or
// errNotServing, and the run is marked unkept, so that its locks outlive its revoke. Then, in
// order, in the state's turn (stateTurns):
//   - the run must be live (call it before revoke), or revoked after an earlier KeepErrored of it
//     failed (revoke then kept its locks); else *ErroredStateRefusedError;
//   - a stored state equal to it (the run's last write did reach the server) leaves nothing to
//     keep: nil;
//   - one that does not follow the stored state (older, another lineage, the same serial with other
//     content: another run wrote since) or a pending state the server keeps is refused
//     (*ErroredStateRefusedError): the objects it holds are not in the stored state, so its run's
//     creates stay in doubt;
//   - the Lease, read now, must hold a lock the run took (a write it could not make because its
//     lock was gone is never made this way); else *ErroredStateRefusedError.
//
// A revoked run forgotten without a pending state has its locks released. It returns an
// *InvalidStateError for data that is not a Terraform state, and the API server's error when the
// state or the Lease could not be read (the run is then remembered, so that a retry of the same
// state is still accepted).
func (s *Server) KeepErrored(ctx context.Context, runID string, state []byte) error {
	sent, err := decodeJSON(state)
	if err != nil {
		return &InvalidStateError{Err: err}
	}
	rn, live := s.creds.find(runID)
	if rn == nil {
		if s.Leading != nil && !s.Leading() {
			return errNotLeading
		}
		return &ErroredStateRefusedError{RunID: runID, Reason: "no run of that ID holds credentials of this state server"}
	}
	if err := s.leads(rn); err != nil {
		// Not this replica's to keep any more, but its run's locks must stay (revoke keeps those of
		// an unkept errored state): released, the next owner would run on the older stored state.
		s.creds.markUnkept(rn)
		return err
	}
	done := s.turns.take(rn.suffix)
	defer done()
	h := s.store.For(rn.suffix).WithLabels(rn.labels)
	name := SecretName(h.workspace, h.suffix)
	stored, found, err := h.Read(ctx)
	if err != nil {
		s.creds.markUnkept(rn)
		return err
	}
	if found {
		if cur, derr := decodeJSON(stored); derr == nil {
			if cur.Serial == sent.Serial && sameState(s.store.Keyring(), stored, state) {
				s.forgetUnkept(ctx, h, rn, live)
				return nil // stored already
			}
			if err := checkFollows(s.store.Keyring(), cur, sent, stored, state, name); err != nil {
				s.forgetUnkept(ctx, h, rn, live)
				return &ErroredStateRefusedError{RunID: runID, Reason: err.Error()}
			}
		}
	}
	if p, hasPending := s.pending.get(rn.suffix); hasPending {
		if cur, err := decodeJSON(p.state); err == nil {
			if err := checkFollows(s.store.Keyring(), cur, sent, p.state, state, name+" (pending)"); err != nil {
				s.forgetUnkept(ctx, h, rn, live)
				return &ErroredStateRefusedError{RunID: runID, Reason: err.Error()}
			}
		}
	}
	lockID, err := s.erroredLock(ctx, h, rn)
	if err != nil {
		var refused *ErroredStateRefusedError
		if errors.As(err, &refused) {
			s.forgetUnkept(ctx, h, rn, live)
		} else {
			s.creds.markUnkept(rn)
		}
		return err
	}
	s.pending.keep(ctx, h, state, lockID, errors.New("Terraform could not send the state it ended with (errored.tfstate)"))
	if !s.pending.has(rn.suffix) {
		s.creds.markUnkept(rn)
		return fmt.Errorf("the errored state of run %s was not kept", runID)
	}
	s.forgetUnkept(ctx, h, rn, live)
	return nil
}

// erroredLock returns the lock the run's errored state is kept under: the lock the Lease stores
// now, which must be one the run took (else an *ErroredStateRefusedError).
func (s *Server) erroredLock(ctx context.Context, h *Handle, rn *run) (string, error) {
	lock, err := h.InspectLock(ctx)
	if err != nil {
		return "", err
	}
	took := lock != nil && s.creds.took(rn, lock.ID)
	if !took {
		return "", &ErroredStateRefusedError{RunID: rn.id, Reason: fmt.Sprintf(
			"state %s is not locked by the run any more, so another run may have written it since", rn.suffix)}
	}
	return lock.ID, nil
}

// forgetUnkept ends what markUnkept recorded: the errored state is kept, or refused for good. A
// revoked run (live false) then has the locks it still holds released, unless its state is pending
// (its lock stays until that is written), as revoke would have. Call it in the state's turn.
func (s *Server) forgetUnkept(ctx context.Context, h *Handle, rn *run, live bool) {
	ids := s.creds.forgetUnkept(rn)
	if live || s.pending.has(rn.suffix) {
		return
	}
	s.creds.release(ctx, h, rn, ids)
}
