package statebackend

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// The handlers of the http backend protocol's requests (see Server for the protocol and its
// sources), each run in its state's turn with the run rn authenticated and h its state's handle
// (with rn's labels). Each returns nil after writing a success response, or the error response to
// write (protocol.fail): 400 for a body that is not what the request needs, 409 for a write or
// delete refused, 423 with the holder's LockInfo for a state locked by another, 503 for an error of
// the API server (the clients retry it).

// get answers GET: the stored state JSON with its Content-MD5 (200), or 404 when there is none;
// when the store has a keyring, sealed with the state's key (Keyring.ServeSealed). A pending state is written first (pendingStates.flush); what was read is the run's seen state.
func (p *protocol) get(w http.ResponseWriter, r *http.Request, h *Handle, rn *run) *httpError {
	if _, err := p.pending.flush(r.Context(), h); err != nil {
		return unavailable(err)
	}
	stored, err := h.readStored(r.Context())
	if err != nil {
		return unavailable(err)
	}
	rn.seen = stored
	if !stored.found {
		w.WriteHeader(http.StatusNotFound)
		return nil
	}
	// A state written before encryption, before keys per state, under a rotated-away passphrase
	// or adopted from another state goes to the run sealed with its state's key, the only one the
	// run has: its targets accept nothing else, and its next write stores it under that key.
	state := h.store.Keyring().ServeSealed(StateID(h.workspace, h.suffix), stored.plain)
	sum := md5.Sum(state)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	_, _ = w.Write(state)
	return nil
}

// checkOwnLock returns nil when run rn holds the state's lock id as the Lease stores it now: the
// Lease is read for every write (a copy this process cached could be stale — a person's
// force-unlock, a new leader recovering the lock — and a write under a lost lock would race the
// run that holds it now). Otherwise it returns a 423 with the holder when another lock holds the
// state, and a 409 when the state is not locked, id is empty (the client holds no lock) or id is
// a lock this run did not take through the server. The http backend client sends its lock ID
// with every write once it holds one (?ID=), and runs always lock (-lock=false only for the
// read-only drift plan, which writes nothing).
func (p *protocol) checkOwnLock(ctx context.Context, h *Handle, rn *run, id string) *httpError {
	lock, err := h.InspectLock(ctx)
	if err != nil {
		return unavailable(err)
	}
	if lock != nil && lock.ID != id {
		return &httpError{status: http.StatusLocked, holder: lock, err: &LockedError{Holder: lock}}
	}
	took := id != "" && p.creds.took(rn, id)
	switch {
	case id == "":
		return &httpError{status: http.StatusConflict, err: fmt.Errorf(
			"state write refused: run %s holds no lock on state %s (a run writes only under the lock it took)", rn.id, h.suffix)}
	case lock == nil:
		return &httpError{status: http.StatusConflict, err: fmt.Errorf(
			"state write refused: the lock %s of run %s on state %s is no longer held (released since it was taken)", id, rn.id, h.suffix)}
	case !took:
		return &httpError{status: http.StatusConflict, err: fmt.Errorf(
			"state write refused: the lock %s on state %s was not taken by run %s", id, h.suffix, rn.id)}
	}
	return nil
}

// post answers POST <address>?ID=<lock ID>: the body (state JSON) is written when rn holds the
// state's lock (checkOwnLock) and it follows the newest accepted state (the pending one, else the
// stored one; a *ConflictError is a 409). A write the API server fails is kept as pending
// (pendingStates.keep) and answered 503. On success the state is recorded for TakeWritten (200).
func (p *protocol) post(w http.ResponseWriter, r *http.Request, h *Handle, rn *run) *httpError {
	body, e := readBody(r, w)
	if e != nil {
		return e
	}
	ctx := r.Context()
	lockID := r.URL.Query().Get("ID")
	if e := p.checkOwnLock(ctx, h, rn, lockID); e != nil {
		return e
	}
	sent, err := decodeJSON(body)
	if err != nil {
		return &httpError{status: http.StatusBadRequest, err: &InvalidStateError{Err: err}}
	}
	if err := p.pending.load(ctx, h.suffix); err != nil {
		return unavailable(err)
	}
	pend, hasPending := p.pending.get(h.suffix)
	if hasPending {
		// The pending state is the newest accepted: the new one must follow it, and is then
		// written in its place, checked against what is stored (writePending).
		if prev, err := decodeJSON(pend.state); err == nil {
			if err := checkFollows(h.store.Keyring(), prev, sent, pend.state, body, SecretName(h.workspace, h.suffix)+" (pending)"); err != nil {
				return &httpError{status: http.StatusConflict, err: err}
			}
		}
		err = writePending(ctx, h, body)
		rn.seen = nil
	} else {
		// From what this run last read or wrote: one request for a one-chunk state.
		var written *storedState
		written, err = writeFrom(ctx, h, body, true, rn.seen)
		rn.seen = written
	}
	var conflict *ConflictError
	var invalid *InvalidStateError
	switch {
	case errors.As(err, &conflict):
		return &httpError{status: http.StatusConflict, err: err}
	case errors.As(err, &invalid):
		return &httpError{status: http.StatusBadRequest, err: err}
	case err != nil:
		p.pending.keep(ctx, h, body, lockID, err)
		return unavailable(err)
	}
	if hasPending {
		if err := p.pending.drop(ctx, h); err != nil {
			return unavailable(err)
		}
	}
	if IsEncrypted(body) {
		// serial and lineage are readable beside the ciphertext; the resource count is not, and
		// decrypting every state a run writes would cost a key derivation per run (Status reads
		// it when it is needed).
		sent.Resources = -1
	}
	sent.SecretName = SecretName(h.workspace, h.suffix)
	p.written.put(h.suffix, sent)
	w.WriteHeader(http.StatusOK)
	return nil
}

// delete removes the state's Secrets (its last version kept in history), when the state is locked
// by a lock this run took (read from the Lease now); the Lease and history stay.
func (p *protocol) delete(w http.ResponseWriter, r *http.Request, h *Handle, rn *run) *httpError {
	ctx := r.Context()
	lock, err := h.InspectLock(ctx)
	if err != nil {
		return unavailable(err)
	}
	ours := lock != nil && p.creds.took(rn, lock.ID)
	if lock != nil && !ours {
		return &httpError{status: http.StatusLocked, holder: lock, err: &LockedError{Holder: lock}}
	}
	if lock == nil {
		return &httpError{status: http.StatusConflict, err: fmt.Errorf(
			"state delete refused: run %s holds no lock on state %s (a run deletes only under the lock it took)", rn.id, h.suffix)}
	}
	if stored, found, err := h.Read(ctx); err != nil {
		return unavailable(err)
	} else if found && h.store.HistoryLimit > 0 {
		if cur, err := decodeJSON(stored); err == nil {
			if _, err := keepVersion(ctx, h, cur, stored); err != nil {
				return unavailable(err)
			}
		}
	}
	if err := deleteState(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix); err != nil {
		return unavailable(err)
	}
	rn.seen = nil
	p.written.forget(h.suffix)
	if err := p.pending.drop(ctx, h); err != nil {
		return unavailable(err)
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// lock answers LOCK: the body's LockInfo (it must have an ID) is taken on the state's Lease with
// Info naming rn (runLockInfo), recorded as rn's, and answered with the lock held (200); 423 with
// the holder when another lock holds the state.
func (p *protocol) lock(w http.ResponseWriter, r *http.Request, h *Handle, rn *run) *httpError {
	body, e := readBody(r, w)
	if e != nil {
		return e
	}
	var info Lock
	if err := json.Unmarshal(body, &info); err != nil || info.ID == "" {
		return &httpError{status: http.StatusBadRequest, err: fmt.Errorf("the body is not a LockInfo with an ID: %v", err)}
	}
	info.Info = runLockInfo(rn.id, info.Info)
	held, err := h.Lock(r.Context(), info)
	var locked *LockedError
	if errors.As(err, &locked) {
		return &httpError{status: http.StatusLocked, holder: locked.Holder, err: err}
	}
	if err != nil {
		return unavailable(err)
	}
	p.creds.addLock(rn, held.ID)
	raw, _ := json.Marshal(held)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
	return nil
}

// unlock answers UNLOCK: the lock the body's LockInfo names is released (200; a state not locked
// is not an error); without an ID (terraform's force-unlock) only a lock rn took is released.
// While the state rn sent is pending the lock is kept (503).
func (p *protocol) unlock(w http.ResponseWriter, r *http.Request, h *Handle, rn *run) *httpError {
	body, e := readBody(r, w)
	if e != nil {
		return e
	}
	ctx := r.Context()
	if p.pending.has(h.suffix) {
		// The lock stays while the state this run sent is not stored: nothing may run on the
		// older stored state. It is released once the pending state is written (pendingStates.flush).
		return unavailable(fmt.Errorf("the state is not saved yet (kept as pending); the lock is kept until it is"))
	}
	var info Lock
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &info); err != nil {
			return &httpError{status: http.StatusBadRequest, err: fmt.Errorf("the body is not a LockInfo: %w", err)}
		}
	}
	id := info.ID
	if id == "" {
		// terraform's force-unlock sends no body: only a lock this run took is released so.
		lock, err := h.InspectLock(ctx)
		if err != nil {
			return unavailable(err)
		}
		if lock == nil {
			return nil
		}
		ours := p.creds.took(rn, lock.ID)
		if !ours {
			return &httpError{status: http.StatusConflict, err: errors.New("unlock without a lock ID: the state is locked by a lock this run did not take")}
		}
		id = lock.ID
	}
	err := h.Unlock(ctx, id)
	var locked *LockedError
	if errors.As(err, &locked) {
		return &httpError{status: http.StatusLocked, holder: locked.Holder, err: err}
	}
	if err != nil {
		return unavailable(err)
	}
	p.creds.dropLock(rn, id)
	w.WriteHeader(http.StatusOK)
	return nil
}
