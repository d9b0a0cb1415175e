package statebackend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A pending state is one the server received from a run (a POST it accepted: the right lock,
// following the stored state) but could not write to the state Secrets. It must outlive the
// controller's process: a run that created objects and whose state is lost would have them
// created again by the next run. So the server writes it, before answering the run, to a Secret of
// its own — tfpending-<state Secret name>, labelled LabelPendingState, gzip-compressed under the
// key "tfstate" — and deletes that Secret once the state is stored. While a state is pending its
// lock is not released (UNLOCK answers 503, and revoking the run's credentials leaves it), so that
// nothing else runs on the older stored state. A pending state over one Secret's 1 MiB (gzipped)
// is kept in memory only; the server says so through OnPending.

// LabelPendingState labels the Secret of a pending state (value "true").
const LabelPendingState = "conductor.io/pending-state"

// PendingSecretName is the name of the Secret that keeps the pending state of a workspace's state.
func PendingSecretName(workspace, suffix string) string {
	return "tfpending-" + SecretName(workspace, suffix)
}

// savePending writes the pending state of h, with the lock ID of the run that sent it, to its Secret.
func (h *Handle) savePending(ctx context.Context, state []byte, lockID string) error {
	gz, err := gzipBytes(state)
	if err != nil {
		return err
	}
	if len(gz) > chunkSize {
		return fmt.Errorf("the pending state is %d bytes gzipped, more than one Secret holds", len(gz))
	}
	labels := map[string]string{LabelPendingState: "true"}
	for k, v := range h.labels {
		labels[k] = v
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: PendingSecretName(h.workspace, h.suffix), Namespace: h.store.namespace, Labels: labels,
			Annotations: map[string]string{"encoding": "gzip", pendingLockAnnotation: lockID}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{stateKey: gz},
	}
	secrets := h.store.kube.CoreV1().Secrets(h.store.namespace)
	_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	return err
}

// pendingLockAnnotation records, on a pending state's Secret, the lock ID of the run that sent it.
const pendingLockAnnotation = "conductor.io/pending-lock-id"

// listPending reads every pending state Secret of the store's namespace (DefaultWorkspace, the
// http backend's only one), by suffix: the state, its labels, and the lock ID of the run that
// sent it; and, by suffix, the pending Secrets whose data does not decode (their states must not
// be ignored, nor stop the others).
func (st *Store) listPending(ctx context.Context) (map[string]pendingState, map[string]error, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelPendingState: "true"})
	list, err := st.kube.CoreV1().Secrets(st.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, err
	}
	prefix := PendingSecretName(DefaultWorkspace, "")
	out, bad := map[string]pendingState{}, map[string]error{}
	for _, s := range list.Items {
		suffix, ok := strings.CutPrefix(s.Name, prefix)
		if !ok || suffix == "" {
			continue
		}
		state, err := gunzipBytes(s.Data[stateKey])
		if err != nil {
			bad[suffix] = fmt.Errorf("pending state Secret %s: %w", s.Name, err)
			continue
		}
		extra := maps.Clone(s.Labels)
		delete(extra, LabelPendingState)
		out[suffix] = pendingState{state: state, labels: extra, lockID: s.Annotations[pendingLockAnnotation]}
	}
	return out, bad, nil
}

// deletePending deletes h's pending state Secret (gone already is not an error).
func (h *Handle) deletePending(ctx context.Context) error {
	err := h.store.kube.CoreV1().Secrets(h.store.namespace).Delete(ctx, PendingSecretName(h.workspace, h.suffix), metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// flush writes a pending state over the stored one: refused with a *ConflictError when the stored
// state is readable and the pending one does not follow it (another lineage, a lower serial: the
// stored state moved on, and is never overwritten); written whatever is stored when the stored
// state cannot be read (a write that failed half-way leaves it so).
func (h *Handle) flush(ctx context.Context, state []byte) error {
	sent, err := decodeJSON(state)
	if err != nil {
		return &InvalidStateError{Err: err}
	}
	if stored, found, err := readStateJSON(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix); err == nil && found {
		if cur, err := decodeJSON(stored); err == nil {
			if err := checkFollows(cur, sent, stored, state, SecretName(h.workspace, h.suffix)); err != nil {
				return err
			}
		}
	}
	return h.write(ctx, state, false)
}

// ErroredStateRefusedError is an errored state refused because it is not known to come from the
// run holding the state's lock: its run is unknown to this server, or its lock is no longer the
// one the Lease stores. The state is not kept; the caller drops it (Router) and reports it.
type ErroredStateRefusedError struct {
	RunID  string
	Reason string
}

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
// In order, under the state's mutex:
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
	if s.Leading != nil && !s.Leading() {
		return errNotLeading
	}
	rn, live := s.runByID(runID)
	if rn == nil {
		return &ErroredStateRefusedError{RunID: runID, Reason: "no run of that ID holds credentials of this state server"}
	}
	unlock := s.serialize(rn.suffix)
	defer unlock()
	h := s.store.For(rn.suffix).WithLabels(rn.labels)
	name := SecretName(h.workspace, h.suffix)
	stored, found, err := h.Read(ctx)
	if err != nil {
		s.markUnkept(rn)
		return err
	}
	if found {
		if cur, derr := decodeJSON(stored); derr == nil {
			if cur.Serial == sent.Serial && sameState(stored, state) {
				s.forgetUnkept(ctx, h, rn, live)
				return nil // stored already
			}
			if err := checkFollows(cur, sent, stored, state, name); err != nil {
				s.forgetUnkept(ctx, h, rn, live)
				return &ErroredStateRefusedError{RunID: runID, Reason: err.Error()}
			}
		}
	}
	s.mu.Lock()
	p, hasPending := s.pending[rn.suffix]
	s.mu.Unlock()
	if hasPending {
		if cur, err := decodeJSON(p.state); err == nil {
			if err := checkFollows(cur, sent, p.state, state, name+" (pending)"); err != nil {
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
			s.markUnkept(rn)
		}
		return err
	}
	s.keepPending(ctx, h, state, lockID, errors.New("Terraform could not send the state it ended with (errored.tfstate)"))
	if !s.hasPending(rn.suffix) {
		s.markUnkept(rn)
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
	s.mu.Lock()
	took := lock != nil && rn.lockIDs[lock.ID]
	s.mu.Unlock()
	if !took {
		return "", &ErroredStateRefusedError{RunID: rn.id, Reason: fmt.Sprintf(
			"state %s is not locked by the run any more, so another run may have written it since", rn.suffix)}
	}
	return lock.ID, nil
}

// runByID finds run runID among the live runs, or else among those revoked with an errored state
// not kept (live false).
func (s *Server) runByID(runID string) (rn *run, live bool) {
	if runID == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if r.id == runID {
			return r, true
		}
	}
	if r, ok := s.unkept[runID]; ok {
		return r, false
	}
	return nil, false
}

// markUnkept records that rn's errored state could not be kept: revoke then leaves its locks held
// and remembers the run, so that KeepErrored can still take that state for it.
func (s *Server) markUnkept(rn *run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn.erroredUnkept = true
	if _, live := s.runs[rn.user]; !live {
		s.unkept[rn.id] = rn
	}
}

// forgetUnkept ends what markUnkept recorded: the errored state is kept, or refused for good. A
// revoked run (live false) then has the locks it still holds released, unless its state is pending
// (its lock stays until that is written), as revoke would have. Call it under the state's mutex.
func (s *Server) forgetUnkept(ctx context.Context, h *Handle, rn *run, live bool) {
	s.mu.Lock()
	rn.erroredUnkept = false
	delete(s.unkept, rn.id)
	_, pending := s.pending[rn.suffix]
	ids := slices.Collect(maps.Keys(rn.lockIDs))
	s.mu.Unlock()
	if live || pending {
		return
	}
	s.releaseLocks(ctx, h, rn, ids)
}
