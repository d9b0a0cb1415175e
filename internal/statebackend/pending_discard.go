package statebackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// A pending state whose stored state moved on — the same lineage at a serial as high or higher,
// written by a run that started after it (with sharding, a replica that did not list the pending
// state yet) — can never be written: the stored state is never overwritten by an older one
// (checkFollows). When the stored state records every resource the pending one does, nothing is
// lost by dropping it, and it is not left for a person to find (issue 64): the server discards
// it, keeping it in the state's history under its serial when the store keeps a history and that
// serial is free (Handle.Restore brings it back: the restore annotation of a resource), deletes
// its Secret, releases the lock of the run that sent it, and answers with a
// *PendingDiscardedError, which its caller reports (a Warning event on the resource). A pending
// state that records a resource the stored one does not is kept (a *PendingHeldError naming
// them): discarded, its objects would be created again by the next run. So is one of another
// lineage (a *ConflictError): it is another state. A person decides those.

// PendingDiscardedError is a pending state discarded, not written, because the stored state is
// newer (see above): nothing is pending any more, and the state's lock is released. It is what
// RetryPending returns then; callers go on as after a write.
type PendingDiscardedError struct {
	// Secret is the pending state's Secret, deleted; Stored and Discarded the serials and lineage.
	Secret            string
	Stored, Discarded State
	// KeptInHistory says whether the discarded state was kept in the history (under its serial).
	KeptInHistory bool
}

func (e *PendingDiscardedError) Error() string {
	kept := "not kept (the history holds another version of that serial, or keeps none)"
	if e.KeptInHistory {
		kept = fmt.Sprintf("kept in the state's history (restore serial %d to bring it back)", e.Discarded.Serial)
	}
	return fmt.Sprintf("the pending state %s (serial %d) was discarded: the stored state is newer (serial %d, lineage %q) and records every resource it does; it is %s",
		e.Secret, e.Discarded.Serial, e.Stored.Serial, e.Stored.Lineage, kept)
}

// discardable reports whether a pending state refused with err may be discarded: the stored state
// is of its lineage and at its serial or a higher one.
func discardable(err error) (*ConflictError, bool) {
	var conflict *ConflictError
	if !errors.As(err, &conflict) {
		return nil, false
	}
	sameLineage := conflict.Stored.Lineage == "" || conflict.Stored.Lineage == conflict.Sent.Lineage
	return conflict, sameLineage && conflict.Sent.Serial <= conflict.Stored.Serial
}

// discard resolves ps, h's pending state that conflict refused (see above), in the state's turn:
// discarded when the stored state records every resource it does, else kept, with a
// *PendingHeldError.
func (p *pendingStates) discard(ctx context.Context, h *Handle, ps pendingState, conflict *ConflictError) error {
	secret := PendingSecretName(h.workspace, h.suffix)
	if only, known := onlyIn(ctx, h, ps.state); !known || len(only) > 0 {
		return &PendingHeldError{Secret: secret, Stored: conflict.Stored, Pending: conflict.Sent, Only: only}
	}
	out := &PendingDiscardedError{Secret: secret, Stored: conflict.Stored, Discarded: conflict.Sent}
	history, err := historySecrets(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
	if err != nil {
		return fmt.Errorf("reading the history before discarding the pending state: %w", err)
	}
	if h.store.HistoryLimit > 0 && len(history[conflict.Sent.Serial]) == 0 {
		if _, err := keepVersion(ctx, h, conflict.Sent, ps.state); err != nil {
			return fmt.Errorf("keeping the pending state in the history before discarding it: %w", err)
		}
		out.KeptInHistory = true
	}
	if err := p.drop(ctx, h); err != nil {
		return err
	}
	if ps.lockID != "" {
		var locked *LockedError
		if err := h.Unlock(ctx, ps.lockID); err != nil && !errors.As(err, &locked) {
			return fmt.Errorf("releasing lock %s after discarding the pending state: %w", ps.lockID, err)
		}
	}
	return out
}

// onlyIn returns the addresses of the resources pending (a state document) records and h's stored
// state does not, sorted; known is false when either cannot be read (encrypted with a key this
// server lacks, not a state of version 4).
func onlyIn(ctx context.Context, h *Handle, pending []byte) (only []string, known bool) {
	keys := h.store.Keyring()
	stored, found, err := readStateJSON(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
	if err != nil || !found {
		return nil, false
	}
	storedPlain, err1 := keys.Open(stored)
	pendingPlain, err2 := keys.Open(pending)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	have := map[string]bool{}
	storedAddrs, ok1 := resourceAddresses(storedPlain)
	pendingAddrs, ok2 := resourceAddresses(pendingPlain)
	if !ok1 || !ok2 {
		return nil, false
	}
	for _, a := range storedAddrs {
		have[a] = true
	}
	for _, a := range pendingAddrs {
		if !have[a] {
			only = append(only, a)
		}
	}
	slices.Sort(only)
	return only, true
}

// PendingHeldError is a pending state the stored state moved past that is kept all the same: it
// records resources the stored state does not (Only), which the next run would create again were
// it discarded, or one of the two cannot be read. It stays pending, its lock held, and nothing
// runs for the resource until a person decides (docs/state.md).
type PendingHeldError struct {
	Secret          string
	Stored, Pending State
	Only            []string
}

func (e *PendingHeldError) Error() string {
	what := "one of the two cannot be read, so what it holds is not known"
	if len(e.Only) > 0 {
		what = fmt.Sprintf("it records resources the stored state does not, which the next run would create again: %v", e.Only)
	}
	return fmt.Sprintf("the pending state %s (serial %d) is older than the stored state (serial %d, lineage %q) and kept: %s",
		e.Secret, e.Pending.Serial, e.Stored.Serial, e.Stored.Lineage, what)
}

// resourceAddresses returns the addresses of the resource instances a state (JSON, version 4)
// records — module.m.aws_s3_bucket.b["k"], data.x.y — and false when it is not such JSON.
func resourceAddresses(state []byte) ([]string, bool) {
	var doc struct {
		Resources []struct {
			Module, Mode, Type, Name string
			Instances                []struct {
				IndexKey json.RawMessage `json:"index_key"`
			}
		}
	}
	if json.Unmarshal(state, &doc) != nil {
		return nil, false
	}
	var out []string
	for _, r := range doc.Resources {
		base := r.Type + "." + r.Name
		if r.Mode == "data" {
			base = "data." + base
		}
		if r.Module != "" {
			base = r.Module + "." + base
		}
		for _, in := range r.Instances {
			out = append(out, base+indexSuffix(in.IndexKey))
		}
	}
	return out, true
}

// indexSuffix is an instance's [key] (count: a number; for_each: a quoted string), or "" for none.
func indexSuffix(raw json.RawMessage) string {
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return "[" + strconv.FormatInt(n, 10) + "]"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return "[" + strconv.Quote(s) + "]"
	}
	return ""
}
