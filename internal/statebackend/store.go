package statebackend

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultHistoryLimit is how many earlier versions of each state a Store keeps unless told.
const DefaultHistoryLimit = 5

// Store reads and writes the states kept in one namespace, in Terraform's kubernetes backend
// layout (layout.go), with locks in the backend's Leases and earlier versions kept beside each
// state (history.go).
type Store struct {
	kube      kubernetes.Interface
	namespace string
	// HistoryLimit is how many earlier versions of each state Handle.Write keeps (the newest by
	// serial); 0 keeps none. NewStore sets DefaultHistoryLimit.
	HistoryLimit int

	// leases holds each lock Lease as this Store last wrote it (name → *coordinationv1.Lease), so
	// that a lock or unlock is one write guarded by its resourceVersion instead of a read and a
	// write; a stale entry costs one Conflict and a read.
	leases sync.Map
}

// NewStore returns a Store of the states in namespace, keeping DefaultHistoryLimit versions.
func NewStore(kube kubernetes.Interface, namespace string) *Store {
	return &Store{kube: kube, namespace: namespace, HistoryLimit: DefaultHistoryLimit}
}

// Namespace is the namespace of the Store's Secrets and Leases.
func (s *Store) Namespace() string { return s.namespace }

// For returns the handle of the state with this suffix in DefaultWorkspace (the only workspace
// the http backend has).
func (s *Store) For(suffix string) *Handle { return s.ForWorkspace(DefaultWorkspace, suffix) }

// ForWorkspace returns the handle of the state of a workspace and suffix.
func (s *Store) ForWorkspace(workspace, suffix string) *Handle {
	return &Handle{store: s, workspace: workspace, suffix: suffix}
}

// Handle is one state of a Store: tfstate-<workspace>-<suffix> and its Lease and history.
type Handle struct {
	store     *Store
	workspace string
	suffix    string
	labels    map[string]string
}

// WithLabels returns a copy of h that puts labels (besides the backend's own) on the Secrets and
// Lease it creates or writes, as the backend's `labels` setting does.
func (h *Handle) WithLabels(labels map[string]string) *Handle {
	c := *h
	c.labels = maps.Clone(labels)
	return &c
}

// Workspace is the handle's Terraform workspace.
func (h *Handle) Workspace() string { return h.workspace }

// Suffix is the handle's secret_suffix.
func (h *Handle) Suffix() string { return h.suffix }

// Read returns the state JSON, or found=false when there is none (ReadState).
func (h *Handle) Read(ctx context.Context) (state []byte, found bool, err error) {
	return ReadState(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
}

// Status returns the state's serial, lineage and resource count (Read).
func (h *Handle) Status(ctx context.Context) (State, bool, error) {
	return Read(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
}

// InspectLock returns the lock held on the state, or nil (InspectLock).
func (h *Handle) InspectLock(ctx context.Context) (*Lock, error) {
	return InspectLock(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
}

// Lock takes the state's lock with info (AcquireLock); a *LockedError names the holder. It starts
// from the Lease as the Store last wrote it, or, when it knows none, creates the Lease at once
// (the common case of a new state); either guess costs one failed write when wrong.
func (h *Handle) Lock(ctx context.Context, info Lock) (*Lock, error) {
	held, lease, err := acquireLock(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix, h.labels, info, h.knownLease(), true)
	h.rememberLease(lease)
	return held, err
}

// Unlock releases the state's lock with this ID (Unlock), starting from the Lease as the Store
// last wrote it.
func (h *Handle) Unlock(ctx context.Context, id string) error {
	lease, err := unlock(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix, id, h.knownLease())
	h.rememberLease(lease)
	return err
}

// Delete removes the state, its history and its Lease (Delete).
func (h *Handle) Delete(ctx context.Context) error {
	h.store.leases.Delete(LeaseName(h.workspace, h.suffix))
	return Delete(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
}

func (h *Handle) knownLease() *coordinationv1.Lease {
	if v, ok := h.store.leases.Load(LeaseName(h.workspace, h.suffix)); ok {
		return v.(*coordinationv1.Lease)
	}
	return nil
}

// rememberLease keeps lease as the last known state of h's Lease (nothing when nil).
func (h *Handle) rememberLease(lease *coordinationv1.Lease) {
	if lease != nil {
		h.store.leases.Store(lease.Name, lease)
	}
}

// ConflictError is a state refused because it does not follow the stored one: another lineage
// (a different state altogether), or the same lineage with a lower serial (an older state).
// Terraform refuses both when it reads state (statemgr: "lineage mismatch", and serials never go
// backwards); this is the same rule applied by the store on write.
type ConflictError struct {
	// Stored is the serial and lineage of the state in the Secret; Sent those of the state refused.
	Stored, Sent State
	Message      string
}

func (e *ConflictError) Error() string { return e.Message }

// InvalidStateError is a state that is not a JSON object with a serial and lineage.
type InvalidStateError struct{ Err error }

func (e *InvalidStateError) Error() string { return "invalid state: " + e.Err.Error() }
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
	sent, err := decodeJSON(state)
	if err != nil {
		return &InvalidStateError{Err: err}
	}
	if sent.Lineage == "" && check {
		return &InvalidStateError{Err: fmt.Errorf("the state has no lineage")}
	}
	kube, ns := h.store.kube, h.store.namespace
	stored, single, found, err := readState(ctx, kube, ns, h.workspace, h.suffix)
	if err != nil && check {
		return fmt.Errorf("reading the stored state: %w", err)
	}
	if err == nil && found {
		if bytes.Equal(stored, state) {
			return nil
		}
		cur, err := decodeJSON(stored)
		if err != nil && check {
			return fmt.Errorf("reading the stored state %s: %w", SecretName(h.workspace, h.suffix), err)
		}
		if err == nil && check {
			if err := checkFollows(cur, sent, SecretName(h.workspace, h.suffix)); err != nil {
				return err
			}
		}
		if err == nil && h.store.HistoryLimit > 0 {
			kept, err := h.keepVersion(ctx, cur, stored)
			if err != nil {
				return fmt.Errorf("keeping the stored state in history: %w", err)
			}
			if err := h.writeState(ctx, single, state); err != nil {
				return err
			}
			return h.pruneHistory(ctx, kept, h.store.HistoryLimit)
		}
	}
	// No version was added to the history, so it needs no pruning.
	return h.writeState(ctx, single, state)
}

// writeState stores state as the current version. A state that fits one chunk replacing a state
// that was one chunk (single, as read) or none is one request: an update of that Secret (with the
// resourceVersion read: a concurrent writer makes it fail with a Conflict) or a create. Leftover
// -part-N Secrets of an older state, if a crash left any, are ignored by every reader while chunk
// 0 is short, and deleted by the next write of two chunks or more. Any other state goes through
// WriteState.
func (h *Handle) writeState(ctx context.Context, single *corev1.Secret, state []byte) error {
	gz, err := gzipBytes(state)
	if err != nil {
		return err
	}
	kube, ns := h.store.kube, h.store.namespace
	if len(gz) >= chunkSize {
		return WriteState(ctx, kube, ns, h.workspace, h.suffix, h.labels, state)
	}
	want := backendLabels(h.workspace, h.suffix, h.labels)
	secrets := kube.CoreV1().Secrets(ns)
	if single == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: SecretName(h.workspace, h.suffix), Namespace: ns,
				Labels: want, Annotations: map[string]string{"encoding": "gzip"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{stateKey: gz},
		}
		_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Chunk 0 exists without state data (or appeared meanwhile): the general path.
			return WriteState(ctx, kube, ns, h.workspace, h.suffix, h.labels, state)
		}
		if err != nil {
			return fmt.Errorf("creating state chunk %s: %w", s.Name, err)
		}
		return nil
	}
	s := single.DeepCopy()
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	maps.Copy(s.Labels, want)
	s.Data[stateKey] = gz
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating state chunk %s: %w", s.Name, err)
	}
	return nil
}

// checkFollows returns a *ConflictError unless sent may replace cur: same lineage (or none
// stored) and a serial no lower.
func checkFollows(cur, sent State, name string) error {
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
	return nil
}
