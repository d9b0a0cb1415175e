package statebackend

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// lockInfoAnnotation holds the JSON lock info on the backend's Lease, as Terraform and OpenTofu
// write it (backend/remote-state/kubernetes: tfstateLockInfoAnnotation).
const lockInfoAnnotation = "app.terraform.io/lock-info"

// Lock is a state lock as the kubernetes backend records it: the Lease's holderIdentity is the lock
// ID and an annotation holds Terraform's LockInfo.
type Lock struct {
	ID        string    `json:"ID"`
	Operation string    `json:"Operation"`
	Who       string    `json:"Who"`
	Version   string    `json:"Version"`
	Created   time.Time `json:"Created"`
	Path      string    `json:"Path"`
}

// InspectLock returns the lock held on a workspace's state, or nil when it is not locked.
func InspectLock(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (*Lock, error) {
	lease, err := kube.CoordinationV1().Leases(namespace).Get(ctx, LeaseName(workspace, suffix), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return nil, nil
	}
	l := &Lock{ID: *lease.Spec.HolderIdentity}
	if raw := lease.Annotations[lockInfoAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), l); err != nil {
			return nil, fmt.Errorf("lock info on lease %s: %w", lease.Name, err)
		}
	}
	return l, nil
}

// Who is the holder Terraform records in locks taken by this process's children: user@hostname,
// computed the way Terraform's statemgr.NewLockInfo does (an empty part when it cannot be read).
// A replacement pod has another hostname, so only a restarted controller in the same pod (or the
// same host) recognises its own locks; others are reported, never taken.
func Who() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// RunRecord is what the controller records before each run, so that a lock it leaves behind when
// it dies can be told from anyone else's.
type RunRecord struct {
	// Who the run's locks name as holder (see Who).
	Who string
	// Started is when the run began; the lock must have been taken after it.
	Started time.Time
}

// IsOwnStaleLock decides whether lock is one the recorded run left behind: held by the same
// holder, taken no earlier than the run started (allowing one minute of clock skew), and the run is
// known to have ended (the controller restarted or the run returned). It never claims a lock
// someone else holds.
func IsOwnStaleLock(lock *Lock, run *RunRecord) bool {
	if lock == nil || run == nil || run.Who == "" {
		return false
	}
	return lock.Who == run.Who && !lock.Created.Before(run.Started.Add(-time.Minute))
}

// ReleaseLock removes the lock with this ID from a workspace's Lease, as `force-unlock ID` would.
// It returns an error when the Lease is held under another ID (the update carries the
// resourceVersion read, so a lock taken in between is never released).
func ReleaseLock(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix, id string) error {
	leases := kube.CoordinationV1().Leases(namespace)
	lease, err := leases.Get(ctx, LeaseName(workspace, suffix), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != id {
		return fmt.Errorf("lease %s is not held by lock %s", lease.Name, id)
	}
	lease.Spec.HolderIdentity = nil
	delete(lease.Annotations, lockInfoAnnotation)
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
