package statebackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// LockedError is a lock refused, or an unlock refused, because the state is locked under another
// ID. Holder is that lock as recorded on the Lease (its info may be empty when the Lease has none).
type LockedError struct{ Holder *Lock }

// Error names the holder as the Lease records it: who, lock ID, operation, since (RFC 3339) and
// its info; or says only "locked by another client" when the holder is unknown.
func (e *LockedError) Error() string {
	h := e.Holder
	if h == nil {
		return "the state is locked by another client"
	}
	return fmt.Sprintf("the state is locked by %s (lock ID %s, operation %s, since %s, %s)",
		h.Who, h.ID, h.Operation, h.Created.Format("2006-01-02T15:04:05Z07:00"), h.Info)
}

// leaseRetry is how acquireLock and unlock retry when the Lease changed between their read and
// their write (errLeaseChanged: a Conflict, an AlreadyExists, a NotFound of a Lease they had not
// read, or a guess that looked held): at most lockAttempts attempts, one after another with no
// wait (each retry reads the Lease afresh; the other writer has already written, so waiting would
// not make the next attempt likelier to succeed).
var leaseRetry = wait.Backoff{Steps: lockAttempts}

// lockAttempts bounds how often acquireLock and unlock re-read a Lease another writer changed
// between their read and their write.
const lockAttempts = 5

// errLeaseChanged marks an attempt that found the Lease changed since it was read: retried
// (leaseRetry), and after lockAttempts attempts reported as "changed N times".
var errLeaseChanged = errors.New("the lock Lease changed since it was read")

// leaseChanged reports whether err is (or wraps) errLeaseChanged: the retry condition of leaseRetry.
func leaseChanged(err error) bool { return errors.Is(err, errLeaseChanged) }

// acquireLock locks a handle's state with info, as Terraform's kubernetes backend does
// (client.go, Lock): the Lease lock-tfstate-<workspace>-<suffix> is created with holderIdentity =
// info.ID, annotation app.terraform.io/lock-info = info as JSON and the backend's labels (plus
// extra), or, when it exists unheld, updated so. Unlike Terraform's, the update carries the
// resourceVersion read and the create fails if another created the Lease first; either race is
// retried from a fresh read (leaseRetry, client-go's retry.OnError), so two callers can never both
// hold the lock.
//
// It returns the lock now held: info, or the recorded lock when the Lease is already held under
// info.ID (taking a lock twice is not an error, as in Terraform). When the Lease is held under
// another ID it returns that holder and a *LockedError. info.ID must not be empty.
//
// acquireLock starts from known, the Lease as this process last wrote or read it
// (nil: unknown), and returns the Lease as written. A known Lease that is not held is updated at
// once with its resourceVersion, and with createFirst an unknown one is created at once: one
// request instead of a read and a write. A stale guess fails (Conflict, AlreadyExists) and is
// retried from a fresh read; a lock is never reported held from a guess, only from a read.
func acquireLock(ctx context.Context, h *Handle, info Lock, known *coordinationv1.Lease, createFirst bool) (*Lock, *coordinationv1.Lease, error) {
	if info.ID == "" {
		return nil, nil, errors.New("lock info has no ID")
	}
	raw, err := json.Marshal(info)
	if err != nil {
		return nil, nil, err
	}
	name := LeaseName(h.workspace, h.suffix)
	lease, fresh := known.DeepCopy(), false
	guessAbsent := known == nil && createFirst
	var (
		held    *Lock
		written *coordinationv1.Lease
	)
	err = retry.OnError(leaseRetry, leaseChanged, func() error {
		if lease == nil && !guessAbsent {
			var err error
			if lease, err = getLease(ctx, h); err != nil {
				return err
			}
			fresh = true
		}
		guessAbsent = false
		if lease == nil {
			created, err := createLockLease(ctx, h, info.ID, raw)
			if err != nil {
				return err
			}
			held, written = &info, created
			return nil
		}
		current, err := leaseLock(lease)
		if err != nil && fresh {
			return err
		}
		if err != nil || (current != nil && !fresh) {
			lease = nil // a guess that looks held is read again, never reported
			return errLeaseChanged
		}
		if current != nil {
			held = current
			if current.ID == info.ID {
				written = lease
				return nil
			}
			return &LockedError{Holder: current}
		}
		updated, err := holdLease(ctx, h, lease, info.ID, raw)
		if apierrors.IsConflict(err) || (apierrors.IsNotFound(err) && !fresh) {
			lease, fresh = nil, false
			return errLeaseChanged
		}
		if err != nil {
			return fmt.Errorf("locking Lease %s: %w", name, err)
		}
		held, written = &info, updated
		return nil
	})
	var locked *LockedError
	switch {
	case leaseChanged(err):
		return nil, nil, fmt.Errorf("lock Lease %s changed %d times while locking it", name, lockAttempts)
	case errors.As(err, &locked):
		return held, nil, err
	case err != nil:
		return nil, nil, err
	}
	return held, written, nil
}

// getLease reads the lock Lease of h's state: nil, and no error, when it does not exist.
func getLease(ctx context.Context, h *Handle) (*coordinationv1.Lease, error) {
	lease, err := h.store.kube.CoordinationV1().Leases(h.store.namespace).Get(ctx, LeaseName(h.workspace, h.suffix), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return lease, err
}

// createLockLease creates the lock Lease of h's state held under id, with the lock info raw (JSON)
// in its lockInfoAnnotation and the backend's labels plus h's (Terraform's kubernetes backend,
// client.go, Lock). It returns errLeaseChanged when another created the Lease first.
func createLockLease(ctx context.Context, h *Handle, id string, raw []byte) (*coordinationv1.Lease, error) {
	name := LeaseName(h.workspace, h.suffix)
	created, err := h.store.kube.CoordinationV1().Leases(h.store.namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: h.store.namespace,
			Labels:      backendLabels(h.workspace, h.suffix, h.labels),
			Annotations: map[string]string{lockInfoAnnotation: string(raw)},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &id},
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil, errLeaseChanged
	}
	if err != nil {
		return nil, fmt.Errorf("creating lock Lease %s: %w", name, err)
	}
	return created, nil
}

// holdLease sets lease (h's lock Lease, as read or guessed, not held) held under id with the lock
// info raw (JSON), and updates it with the resourceVersion it carries: the API server's error as
// is (a Conflict when it changed since, a NotFound when it was deleted).
func holdLease(ctx context.Context, h *Handle, lease *coordinationv1.Lease, id string, raw []byte) (*coordinationv1.Lease, error) {
	lease.Spec.HolderIdentity = &id
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[lockInfoAnnotation] = string(raw)
	return h.store.kube.CoordinationV1().Leases(h.store.namespace).Update(ctx, lease, metav1.UpdateOptions{})
}

// unlock releases the lock with this ID on a handle's state, as Terraform's kubernetes backend
// does (client.go, Unlock: holderIdentity and the lock-info annotation removed, the Lease kept).
// Unlike Terraform's, a state that is not locked (no Lease, or no holder) is not an error, so that
// a retried unlock succeeds. It returns a *LockedError when the Lease is held under another ID.
// The update carries the resourceVersion read; a lock taken in between is re-read, never released
// (leaseRetry, client-go's retry.OnError).
//
// unlock starts from known, the Lease as this process last wrote it (nil: unknown):
// when it shows the lock id held, it is updated at once with its resourceVersion (a Conflict means
// it changed since, and the Lease is read again). It returns the Lease as written, if it was.
func unlock(ctx context.Context, h *Handle, id string, known *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := h.store.kube.CoordinationV1().Leases(h.store.namespace)
	name := LeaseName(h.workspace, h.suffix)
	lease := known.DeepCopy()
	if lease != nil {
		if current, err := leaseLock(lease); err != nil || current == nil || current.ID != id {
			lease = nil // only a guess that shows this very lock is written without a read
		}
	}
	var written *coordinationv1.Lease
	err := retry.OnError(leaseRetry, leaseChanged, func() error {
		if lease == nil {
			var err error
			lease, err = leases.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil // written stays nil: there is no Lease
			}
			if err != nil {
				return err
			}
		}
		current, err := leaseLock(lease)
		if err != nil {
			return err
		}
		if current == nil {
			written = lease
			return nil
		}
		if current.ID != id {
			return &LockedError{Holder: current}
		}
		lease.Spec.HolderIdentity = nil
		delete(lease.Annotations, lockInfoAnnotation)
		updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			lease = nil // changed or deleted since: read it again
			return errLeaseChanged
		}
		if err != nil {
			return fmt.Errorf("unlocking Lease %s: %w", name, err)
		}
		written = updated
		return nil
	})
	if leaseChanged(err) {
		return nil, fmt.Errorf("lock Lease %s changed %d times while unlocking it", name, lockAttempts)
	}
	if err != nil {
		return nil, err
	}
	return written, nil
}

// leaseLock is the lock a Lease records: nil when it has no holder; else its lockInfoAnnotation
// (JSON, as Terraform's kubernetes backend writes it) with ID the holderIdentity. An annotation
// that is not LockInfo JSON is an error.
func leaseLock(lease *coordinationv1.Lease) (*Lock, error) {
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return nil, nil
	}
	l := &Lock{}
	if raw := lease.Annotations[lockInfoAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), l); err != nil {
			return nil, fmt.Errorf("lock info on lease %s: %w", lease.Name, err)
		}
	}
	l.ID = *lease.Spec.HolderIdentity
	return l, nil
}
