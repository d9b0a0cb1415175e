package statebackend

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// HeldLocks lists the state locks held now in namespace: the state backend's Leases (label
// tfstate=true, as the kubernetes backend and Acquire label them) that have a holder, with the
// LockInfo each records (Created is when the lock was taken, UTC; zero when the Lease carries no
// lock info). One LIST of the namespace's state Leases; the API server's error as it is.
func HeldLocks(ctx context.Context, kube kubernetes.Interface, namespace string) ([]Lock, error) {
	list, err := kube.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: labelTFState + "=true"})
	if err != nil {
		return nil, err
	}
	var held []Lock
	for i := range list.Items {
		l, err := leaseLock(&list.Items[i])
		if err != nil || l == nil {
			continue // unreadable lock info still holds the lock, but has no age to report
		}
		held = append(held, *l)
	}
	return held, nil
}

// LockTimes is HeldLocks as metrics.Sources.Locks wants it: when each lock held in namespace was
// taken.
func LockTimes(kube kubernetes.Interface, namespace string) func(context.Context) ([]time.Time, error) {
	return func(ctx context.Context) ([]time.Time, error) {
		held, err := HeldLocks(ctx, kube, namespace)
		times := make([]time.Time, len(held))
		for i := range held {
			times[i] = held[i].Created
		}
		return times, err
	}
}
