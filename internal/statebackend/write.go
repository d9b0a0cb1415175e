package statebackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// ConflictError is a state refused because it does not follow the stored one: another lineage
// (a different state altogether), or the same lineage with a lower serial (an older state).
// Terraform refuses both when it reads state (statemgr: "lineage mismatch", and serials never go
// backwards); this is the same rule applied by the store on write.
type ConflictError struct {
	// Stored is the serial and lineage of the state in the Secret; Sent those of the state refused.
	Stored, Sent State
	Message      string
}

// Error is Message: the stored state's Secret, serial and lineage, and why the sent one does not
// follow it (checkFollows).
func (e *ConflictError) Error() string { return e.Message }

// InvalidStateError is a state that is not a JSON object with a serial and lineage.
type InvalidStateError struct{ Err error }

// Error is "invalid state: " and why the data is not a state.
func (e *InvalidStateError) Error() string { return "invalid state: " + e.Err.Error() }

// Unwrap returns why the data is not a state (wrapping encoding/json's error when it is not JSON),
// for errors.Is and errors.As.
func (e *InvalidStateError) Unwrap() error { return e.Err }

// Write stores state (Terraform state JSON) as the new version of h's state. It refuses, with a
// *ConflictError, a state whose lineage differs from the stored one's or whose serial is lower for
// the same lineage, and with an *InvalidStateError one that is not state JSON. A state equal byte
// for byte to the stored one is not written again. Otherwise the stored version is first kept in
// the history (unless HistoryLimit is 0), then the new one written (WriteState), then the history
// cut to the newest HistoryLimit versions. Any other error means the state may not be written.
func (h *Handle) Write(ctx context.Context, state []byte) error {
	return h.write(ctx, state, true)
}

// write is Write; with check false the stored state is replaced whatever its lineage and serial,
// and even when it cannot be read (still kept in history when it can).
func (h *Handle) write(ctx context.Context, state []byte, check bool) error {
	_, err := writeFrom(ctx, h, state, check, nil)
	return err
}

// storedState is what this process last read or wrote of a state: its JSON, and chunk 0's Secret
// when the state is that one Secret (nil for two chunks or more); found false when there was none.
type storedState struct {
	plain  []byte
	single *corev1.Secret
	found  bool
}

// readStored reads the state as it is stored now.
func (h *Handle) readStored(ctx context.Context) (*storedState, error) {
	plain, single, found, err := readState(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
	if err != nil {
		return nil, err
	}
	return &storedState{plain: plain, single: single, found: found}, nil
}

// errStale says a one-request write found the state changed since it was read: it is done again
// from a fresh read.
var errStale = errors.New("the state changed since it was read")

// staleRetry is how writeFrom redoes a write that found the state stale (errStale): once more, at
// once (no wait: the retry reads the state afresh, so waiting would not make it likelier to
// succeed). A second errStale (another writer between that read and the write) is returned.
var staleRetry = wait.Backoff{Steps: 2}

// isStale reports whether err is (or wraps) errStale: the retry condition of staleRetry.
func isStale(err error) bool { return errors.Is(err, errStale) }

// writeFrom is write starting from known, what this process last read or wrote of the state (nil:
// read it now), and returns what it wrote, for the next write. known saves the read only for a
// one-chunk state replacing a one-chunk state or none: the write is then one update guarded by
// the resourceVersion known holds (or one create), so a state changed since makes it conflict,
// and it is done again from a fresh read, checks included (staleRetry, client-go's retry.OnError).
// Otherwise the state is read first.
func writeFrom(ctx context.Context, h *Handle, state []byte, check bool, known *storedState) (*storedState, error) {
	sent, err := decodeJSON(state)
	if err != nil {
		return nil, &InvalidStateError{Err: err}
	}
	if sent.Lineage == "" && check {
		return nil, &InvalidStateError{Err: fmt.Errorf("the state has no lineage")}
	}
	gz, err := gzipBytes(state)
	if err != nil {
		return nil, err
	}
	if !check || len(gz) >= chunkSize || (known != nil && known.found && known.single == nil) {
		known = nil
	}
	var written *storedState
	err = retry.OnError(staleRetry, isStale, func() error {
		stored, fresh, rerr := known, known == nil, error(nil)
		if fresh {
			stored, rerr = h.readStored(ctx)
		}
		known = nil // a retry starts from a fresh read
		var err error
		written, err = writeOver(ctx, h, stored, rerr, sent, state, gz, check, fresh)
		return err
	})
	return written, err
}

// writeOver writes state (sent its serial and lineage, gz its gzip) over stored (or, when the read
// failed with rerr, over whatever is there, if check is false): equal bytes are not written again,
// the stored version is checked (checkFollows) and kept in history, the new one written, and the
// history cut.
func writeOver(ctx context.Context, h *Handle, stored *storedState, rerr error, sent State, state, gz []byte, check, fresh bool) (*storedState, error) {
	if rerr != nil && check {
		return nil, fmt.Errorf("reading the stored state: %w", rerr)
	}
	if rerr != nil {
		stored = &storedState{}
	}
	var kept map[int64][]corev1.Secret
	if stored.found {
		if bytes.Equal(stored.plain, state) {
			return stored, nil
		}
		cur, err := decodeJSON(stored.plain)
		if err != nil && check {
			return nil, fmt.Errorf("reading the stored state %s: %w", SecretName(h.workspace, h.suffix), err)
		}
		if err == nil && check {
			if err := checkFollows(h.store.Keyring(), cur, sent, stored.plain, state, SecretName(h.workspace, h.suffix)); err != nil {
				return nil, err
			}
		}
		if err == nil && h.store.HistoryLimit > 0 {
			if kept, err = keepVersion(ctx, h, cur, stored.plain); err != nil {
				return nil, fmt.Errorf("keeping the stored state in history: %w", err)
			}
		}
	}
	single, err := writeState(ctx, h, stored, state, gz, fresh)
	if err != nil {
		return nil, err
	}
	if kept != nil {
		// Only a version added to the history can take it over the limit.
		if err := pruneHistory(ctx, h, kept, h.store.HistoryLimit); err != nil {
			return nil, err
		}
	}
	return &storedState{plain: bytes.Clone(state), single: single, found: true}, nil
}

// writeState stores state (gz, its gzip) over stored as the current version, and returns chunk
// 0's Secret as written when that is the whole state. A state that fits one chunk replacing a
// state that was one chunk or none is one request: an update of that Secret with the
// resourceVersion read, or a create; errStale when it changed or appeared since stored was known
// (fresh false). Leftover -part-N Secrets of an older state, if a crash left any, are ignored by
// every reader while chunk 0 is short, and deleted by the next write of two chunks or more. Any
// other state goes through WriteState, as does a create that meets a chunk 0 a fresh read found
// without state data.
func writeState(ctx context.Context, h *Handle, stored *storedState, state, gz []byte, fresh bool) (*corev1.Secret, error) {
	kube, ns := h.store.kube, h.store.namespace
	single := stored.single
	if len(gz) >= chunkSize || (stored.found && single == nil) {
		return nil, writeStateJSON(ctx, kube, ns, h.workspace, h.suffix, h.labels, state)
	}
	want := backendLabels(h.workspace, h.suffix, h.labels)
	secrets := kube.CoreV1().Secrets(ns)
	if single == nil {
		created, err := secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: SecretName(h.workspace, h.suffix), Namespace: ns,
				Labels: want, Annotations: map[string]string{"encoding": "gzip"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{stateKey: gz},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && fresh {
			return nil, writeStateJSON(ctx, kube, ns, h.workspace, h.suffix, h.labels, state)
		}
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating state chunk %s: %w", SecretName(h.workspace, h.suffix), errStale)
		}
		if err != nil {
			return nil, fmt.Errorf("creating state chunk %s: %w", SecretName(h.workspace, h.suffix), err)
		}
		return created, nil
	}
	s := single.DeepCopy()
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	maps.Copy(s.Labels, want)
	s.Data[stateKey] = gz
	updated, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("updating state chunk %s: %w", s.Name, errStale)
	}
	if err != nil {
		return nil, fmt.Errorf("updating state chunk %s: %w", s.Name, err)
	}
	return updated, nil
}

// checkFollows returns a *ConflictError unless sent (sentRaw its JSON) may replace cur (curRaw):
// same lineage (or none stored), and a serial higher, or equal with the same content (a client's
// retry of the write that stored it). Terraform's state managers raise the serial on every
// change they persist (statemgr's PersistState, both clients), so two different states of one
// serial come from two writers — an old run's N+1 after a newer run's N+1 — and the stored one is
// kept.
func checkFollows(keys *Keyring, cur, sent State, curRaw, sentRaw []byte, name string) error {
	if cur.Lineage != "" && sent.Lineage != cur.Lineage {
		return &ConflictError{Stored: cur, Sent: sent, Message: fmt.Sprintf(
			"state refused: its lineage %q differs from the lineage %q of the stored state %s "+
				"(serial %d); it is another state, not a new version of this one",
			sent.Lineage, cur.Lineage, name, cur.Serial)}
	}
	if sent.Serial < cur.Serial {
		return &ConflictError{Stored: cur, Sent: sent, Message: fmt.Sprintf(
			"state refused: its serial %d is lower than the serial %d of the stored state %s "+
				"(lineage %q); it is an older version", sent.Serial, cur.Serial, name, cur.Lineage)}
	}
	if sent.Serial == cur.Serial && !sameState(keys, curRaw, sentRaw) {
		return &ConflictError{Stored: cur, Sent: sent, Message: fmt.Sprintf(
			"state refused: it has serial %d, as the stored state %s (lineage %q) has, but other "+
				"content; two runs wrote serial %d, and the stored one is kept", sent.Serial, name, cur.Lineage, sent.Serial)}
	}
	return nil
}

// sameState reports whether two state JSON documents hold the same values (byte-equal, or equal
// once decoded: a state written again by another encoder may differ in spacing and key order),
// comparing their plaintexts when they are encrypted (opened with keys: two encryptions of one
// state differ in salt and nonce); a document keys cannot open is not the same.
func sameState(keys *Keyring, a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var err error
	if a, err = keys.Open(a); err != nil {
		return false
	}
	if b, err = keys.Open(b); err != nil {
		return false
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
