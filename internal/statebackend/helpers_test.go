package statebackend

import (
	"context"

	"k8s.io/client-go/kubernetes"
)

// acquireFresh takes a lock from a fresh read of its Lease (no Store's known copy), as another
// process (a person's terraform, another controller) would.
func acquireFresh(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix string, extra map[string]string, info Lock) (*Lock, error) {
	held, _, err := acquireLock(ctx, NewStore(kube, namespace).ForWorkspace(workspace, suffix).WithLabels(extra), info, nil, false)
	return held, err
}

// unlockFresh releases a lock from a fresh read of its Lease.
func unlockFresh(ctx context.Context, kube kubernetes.Interface, namespace, workspace, suffix, id string) error {
	_, err := unlock(ctx, NewStore(kube, namespace).ForWorkspace(workspace, suffix), id, nil)
	return err
}
