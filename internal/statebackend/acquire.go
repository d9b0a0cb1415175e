package statebackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LockedError is a lock refused, or an unlock refused, because the state is locked under another
// ID. Holder is that lock as recorded on the Lease (its info may be empty when the Lease has none).
type LockedError struct{ Holder *Lock }

func (e *LockedError) Error() string {
	h := e.Holder
	if h == nil {
		return "the state is locked by another client"
	}
	return fmt.Sprintf("the state is locked by %s (lock ID %s, operation %s, since %s, %s)",
		h.Who, h.ID, h.Operation, h.Created.Format("2006-01-02T15:04:05Z07:00"), h.Info)
}

// lockAttempts bounds how often AcquireLock and Unlock re-read a Lease another writer changed
// between their read and their write.
const lockAttempts = 5

// AcquireLock locks a workspace's state with info, as Terraform's kubernetes backend does
// (client.go, Lock): the Lease lock-tfstate-<workspace>-<suffix> is created with holderIdentity =
// info.ID, annotation app.terraform.io/lock-info = info as JSON and the backend's labels (plus
// extra), or, when it exists unheld, updated so. Unlike Terraform's, the update carries the
// resourceVersion read and the create fails if another created the Lease first; either race is
// retried from a fresh read, so two callers can never both hold the lock.
//
// It returns the lock now held: info, or the recorded lock when the Lease is already held under
// info.ID (taking a lock twice is not an error, as in Terraform). When the Lease is held under
// another ID it returns that holder and a *LockedError. info.ID must not be empty.
func AcquireLock(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string, extra map[string]string, info Lock) (held *Lock, err error) {
	if info.ID == "" {
		return nil, errors.New("lock info has no ID")
	}
	raw, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	leases := kube.CoordinationV1().Leases(namespace)
	name := LeaseName(workspace, suffix)
	for range lockAttempts {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			id := info.ID
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Name: name, Namespace: namespace,
					Labels:      backendLabels(workspace, suffix, extra),
					Annotations: map[string]string{lockInfoAnnotation: string(raw)},
				},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &id},
			}
			_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("creating lock Lease %s: %w", name, err)
			}
			return &info, nil
		}
		if err != nil {
			return nil, err
		}
		if current, err := leaseLock(lease); err != nil {
			return nil, err
		} else if current != nil {
			if current.ID == info.ID {
				return current, nil
			}
			return current, &LockedError{Holder: current}
		}
		id := info.ID
		lease.Spec.HolderIdentity = &id
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[lockInfoAnnotation] = string(raw)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("locking Lease %s: %w", name, err)
		}
		return &info, nil
	}
	return nil, fmt.Errorf("lock Lease %s changed %d times while locking it", name, lockAttempts)
}

// Unlock releases the lock with this ID on a workspace's state, as Terraform's kubernetes backend
// does (client.go, Unlock: holderIdentity and the lock-info annotation removed, the Lease kept).
// Unlike Terraform's, a state that is not locked (no Lease, or no holder) is not an error, so that
// a retried unlock succeeds. It returns a *LockedError when the Lease is held under another ID.
// The update carries the resourceVersion read; a lock taken in between is re-read, never released.
func Unlock(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix, id string) error {
	leases := kube.CoordinationV1().Leases(namespace)
	name := LeaseName(workspace, suffix)
	for range lockAttempts {
		lease, err := leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		current, err := leaseLock(lease)
		if err != nil {
			return err
		}
		if current == nil {
			return nil
		}
		if current.ID != id {
			return &LockedError{Holder: current}
		}
		lease.Spec.HolderIdentity = nil
		delete(lease.Annotations, lockInfoAnnotation)
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("unlocking Lease %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("lock Lease %s changed %d times while unlocking it", name, lockAttempts)
}

// leaseLock is the lock a Lease records, or nil when it has no holder. The ID is always the
// holderIdentity; the rest comes from the lock-info annotation when present.
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
