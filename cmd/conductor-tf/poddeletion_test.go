package main

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func managerPod(deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "conductor-system", Name: "manager-0"}}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
		p.Finalizers = []string{"test"} // the fake clientset keeps an object with a deletionTimestamp only with a finalizer
	}
	return p
}

func stopped(ctx context.Context, within time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(within):
		return false
	}
}

// A manager whose pod is being deleted stops as on SIGTERM, whether the deletion was there when it
// started or came later, and one whose pod went away after it was seen stops too; out of a
// cluster (no such pod) nothing is watched and only the signal stops it.
func TestStopOnPodDeletion(t *testing.T) {
	const every = 20 * time.Millisecond
	t.Run("deleting at start", func(t *testing.T) {
		kube := fake.NewClientset(managerPod(true))
		ctx := stopOnPodDeletion(context.Background(), kube, "conductor-system", "manager-0", every, logr.Discard())
		if ctx.Err() == nil {
			t.Fatal("a manager started in a pod being deleted must stop before it serves")
		}
	})
	t.Run("deleted later", func(t *testing.T) {
		kube := fake.NewClientset(managerPod(false))
		ctx := stopOnPodDeletion(context.Background(), kube, "conductor-system", "manager-0", every, logr.Discard())
		if stopped(ctx, 5*every) {
			t.Fatal("stopped while its pod is not being deleted")
		}
		if _, err := kube.CoreV1().Pods("conductor-system").Update(context.Background(), managerPod(true), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if !stopped(ctx, 2*time.Second) {
			t.Fatal("did not stop after its pod was marked for deletion")
		}
	})
	t.Run("gone later", func(t *testing.T) {
		kube := fake.NewClientset(managerPod(false))
		ctx := stopOnPodDeletion(context.Background(), kube, "conductor-system", "manager-0", every, logr.Discard())
		if err := kube.CoreV1().Pods("conductor-system").Delete(context.Background(), "manager-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if !stopped(ctx, 2*time.Second) {
			t.Fatal("did not stop after its pod was deleted")
		}
	})
	t.Run("no such pod", func(t *testing.T) {
		kube := fake.NewClientset()
		signal, send := context.WithCancel(context.Background())
		ctx := stopOnPodDeletion(signal, kube, "conductor-system", "manager-0", every, logr.Discard())
		if stopped(ctx, 5*every) {
			t.Fatal("a manager outside a cluster stopped without a signal")
		}
		send()
		if !stopped(ctx, time.Second) {
			t.Fatal("the signal did not stop it")
		}
	})
	t.Run("no pod name", func(t *testing.T) {
		ctx := stopOnPodDeletion(context.Background(), fake.NewClientset(managerPod(true)), "conductor-system", "", every, logr.Discard())
		if ctx.Err() != nil {
			t.Fatal("without POD_NAME no pod is read")
		}
	})
}
