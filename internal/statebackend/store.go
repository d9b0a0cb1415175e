package statebackend

import (
	"context"
	"maps"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes"
)

// DefaultHistoryLimit is how many earlier versions of each state a Store keeps unless told.
const DefaultHistoryLimit = 5

// Store reads and writes the states kept in one namespace, in Terraform's kubernetes backend
// layout (layout.go; writes checked and made in write.go), with locks in the backend's Leases
// (acquire.go) and earlier versions kept beside each state (history.go).
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

	// keys returns the keyring of state encryption (nil: states are not encrypted); see SetKeys.
	keys func() *Keyring
}

// SetKeys makes keys the source of the keyring with which the store opens encrypted states (Read,
// Status, the checks of a write, Restore) and the server configures its runs' encryption
// (IssueRunAs). keys is called for each use and may return nil (no encryption: a run gets no
// TF_ENCRYPTION, and an encrypted state cannot be opened). Call it before the store is used.
func (s *Store) SetKeys(keys func() *Keyring) { s.keys = keys }

// Keyring is the keyring of state encryption now, or nil when states are not encrypted.
func (s *Store) Keyring() *Keyring {
	if s.keys == nil {
		return nil
	}
	return s.keys()
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

// Read returns the state JSON, assembled from all its chunks and decrypted when OpenTofu encrypted
// it (Keyring.Open), or found=false when there is none. It returns an error wrapping ErrNoStateKey
// when the state is encrypted with a key the store's keyring does not hold.
func (h *Handle) Read(ctx context.Context) (state []byte, found bool, err error) {
	state, found, err = readStateJSON(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
	if err != nil || !found {
		return state, found, err
	}
	state, err = h.store.Keyring().Open(state)
	return state, err == nil, err
}

// Status returns the state's serial, lineage and resource count, or found=false when there is
// none (no Secret, or no "tfstate" key in it).
func (h *Handle) Status(ctx context.Context) (State, bool, error) {
	return readStatus(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix, h.store.Keyring())
}

// Exists reports whether anything of the state is in the namespace: its chunk-0 Secret or its
// lock Lease. A state name whose Secret or Lease exists is taken, whoever wrote it.
func (h *Handle) Exists(ctx context.Context) (bool, error) {
	return exists(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
}

// InspectLock returns the lock held on the state, or nil when it is not locked.
func (h *Handle) InspectLock(ctx context.Context) (*Lock, error) {
	return inspectLock(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
}

// Lock takes the state's lock with info (acquireLock); a *LockedError names the holder. It starts
// from the Lease as the Store last wrote it, or, when it knows none, creates the Lease at once
// (the common case of a new state); either guess costs one failed write when wrong.
func (h *Handle) Lock(ctx context.Context, info Lock) (*Lock, error) {
	held, lease, err := acquireLock(ctx, h, info, h.store.knownLease(LeaseName(h.workspace, h.suffix)), true)
	h.store.rememberLease(lease)
	return held, err
}

// Unlock releases the state's lock with this ID as Terraform's kubernetes backend does (unlock),
// starting from the Lease as the Store last wrote it; a state not locked is not an error, a lock
// held under another ID is a *LockedError.
func (h *Handle) Unlock(ctx context.Context, id string) error {
	lease, err := unlock(ctx, h, id, h.store.knownLease(LeaseName(h.workspace, h.suffix)))
	h.store.rememberLease(lease)
	return err
}

// ReleaseLock removes the lock with this ID, as `force-unlock ID` would: an error when the Lease
// is missing or held under another ID (the update carries the resourceVersion read, so a lock
// taken in between is never released).
func (h *Handle) ReleaseLock(ctx context.Context, id string) error {
	h.store.leases.Delete(LeaseName(h.workspace, h.suffix))
	return releaseLock(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix, id)
}

// Delete removes the state, its history and its Lease; objects already gone are not an error.
func (h *Handle) Delete(ctx context.Context) error {
	h.store.leases.Delete(LeaseName(h.workspace, h.suffix))
	return deleteAll(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
}

// OrphanedFrom returns the resource whose deletion orphaned the state (its LabelOrphanedFrom), or
// "" when the Secret is missing or not orphaned.
func (h *Handle) OrphanedFrom(ctx context.Context) (string, error) {
	return orphanedFrom(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix)
}

// Orphan labels the state as orphaned from resource (LabelOrphanedFrom set, LabelResource
// removed), every chunk of it; the state itself is untouched so that it can be adopted again. A
// missing Secret is not an error.
func (h *Handle) Orphan(ctx context.Context, resource string) error {
	return orphan(ctx, h.store.kube, h.store.namespace, h.workspace, h.suffix, resource)
}

// Adopt moves the orphaned state Secret `from` (in the same namespace) to this state, for
// resource (see adopt); an *AdoptError says why an adoption is refused.
func (h *Handle) Adopt(ctx context.Context, from, resource string) error {
	return adopt(ctx, h.store.kube, h.store.namespace, from, h.workspace, h.suffix, resource, h.store.Keyring())
}

// knownLease is the lock Lease name as this process last wrote or read it (rememberLease), or nil
// when unknown: a guess, never reported as held without a read (acquireLock, unlock).
func (s *Store) knownLease(name string) *coordinationv1.Lease {
	if v, ok := s.leases.Load(name); ok {
		return v.(*coordinationv1.Lease)
	}
	return nil
}

// rememberLease keeps lease as the last known state of its lock Lease (nothing when nil).
func (s *Store) rememberLease(lease *coordinationv1.Lease) {
	if lease != nil {
		s.leases.Store(lease.Name, lease)
	}
}
