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
// ID and an annotation holds Terraform's LockInfo. It is also the LockInfo JSON body of the http
// backend's LOCK and UNLOCK requests. Fields and their order are those of Terraform's
// statemgr.LockInfo (internal/states/statemgr/locker.go), so that the JSON is the same.
type Lock struct {
	// ID is the lock's ID, a UUID the client makes.
	ID string `json:"ID"`
	// Operation is the Terraform operation, e.g. "OperationTypeApply".
	Operation string `json:"Operation"`
	// Info is extra information; a lock taken through Server names the run ("conductor-tf run <id>").
	Info string `json:"Info"`
	// Who is user@hostname of the process that took the lock.
	Who string `json:"Who"`
	// Version is the Terraform or OpenTofu version that took the lock.
	Version string `json:"Version"`
	// Created is when the lock was taken (UTC).
	Created time.Time `json:"Created"`
	// Path is the state's path, when the backend sets one (empty for kubernetes and http).
	Path string `json:"Path"`
}

// inspectLock returns the lock held on a workspace's state, or nil when it is not locked.
func inspectLock(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string) (*Lock, error) {
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
//
// In a cluster every pod of the controller's Deployment has the same hostname (the pod template
// sets spec.hostname), so Who names the deployment, not the pod: a replacement pod recognises the
// locks its dead predecessor's runs left behind. On a workstation it names the user and host.
func Who() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	return name + "@" + host
}

// RunRecord is what the controller recorded of a resource's last run before it started, and what
// it knows of that run now, so that a lock the run left behind can be told from anyone else's.
type RunRecord struct {
	// Who the run's locks name as holder (see Who), as recorded before the run.
	Who string
	// Started is when the run began; the lock must have been taken after it.
	Started time.Time
	// Ended is when the run was recorded as finished; zero while it is recorded as Running (which,
	// found after a restart, means the controller died during it).
	Ended time.Time
	// Alive is true when the run is still running (waiting for or holding a slot of this
	// controller's pool). A live run's lock is never taken.
	Alive bool
}

// lockClockSkew is how far lock and run timestamps may disagree (they come from the same host's
// clock in a pod, but from two hosts when a person runs the controller elsewhere).
const lockClockSkew = time.Minute

// IsOwnStaleLock decides whether lock is one a dead run of this deployment left behind: the lock
// names self as holder, the recorded run was ours (same holder), the lock was taken while that run
// went on (from its start, or up to its recorded end, each ±1 minute of skew), and the run is no
// longer alive. It never claims a lock someone else holds (another user or host, a person running
// terraform by hand) nor one whose run is still alive.
func IsOwnStaleLock(lock *Lock, run *RunRecord, self string) bool {
	if lock == nil || run == nil || run.Who == "" || run.Alive {
		return false
	}
	if lock.Who != self || run.Who != self {
		return false
	}
	if lock.Created.Before(run.Started.Add(-lockClockSkew)) {
		return false
	}
	return run.Ended.IsZero() || !lock.Created.After(run.Ended.Add(lockClockSkew))
}

// releaseLock removes the lock with this ID from a workspace's Lease, as `force-unlock ID` would.
// It returns an error when the Lease is held under another ID (the update carries the
// resourceVersion read, so a lock taken in between is never released).
func releaseLock(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix, id string) error {
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
