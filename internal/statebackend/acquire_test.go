package statebackend

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestLeaseRetryBounds: a Lease that changes between every read and write (each update conflicts)
// is tried lockAttempts times, one after another without waiting, then reported as changed; an
// error that is not a change (Forbidden) is returned at once, untouched.
func TestLeaseRetryBounds(t *testing.T) {
	ctx := context.Background()
	leases := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	for _, tc := range []struct {
		reason   string
		held     string // the Lease's holder before the call
		call     func(h *Handle) error
		failWith error
		wantErr  string
		wantN    int
	}{
		{reason: "lock: every update conflicts", call: func(h *Handle) error {
			_, _, err := acquireLock(ctx, h, Lock{ID: "mine"}, nil, false)
			return err
		}, failWith: apierrors.NewConflict(leases, "l", errors.New("changed")), wantErr: "changed 5 times while locking", wantN: lockAttempts},
		{reason: "unlock: every update conflicts", held: "mine", call: func(h *Handle) error {
			_, err := unlock(ctx, h, "mine", nil)
			return err
		}, failWith: apierrors.NewConflict(leases, "l", errors.New("changed")), wantErr: "changed 5 times while unlocking", wantN: lockAttempts},
		{reason: "lock: Forbidden is not retried", call: func(h *Handle) error {
			_, _, err := acquireLock(ctx, h, Lock{ID: "mine"}, nil, false)
			return err
		}, failWith: apierrors.NewForbidden(leases, "l", errors.New("no")), wantErr: "locking Lease", wantN: 1},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName(DefaultWorkspace, "s"), Namespace: "ns"}}
			if tc.held != "" {
				lease.Spec.HolderIdentity = &tc.held
			}
			kube := fake.NewClientset(lease)
			updates := 0
			kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				updates++
				return true, nil, tc.failWith
			})
			start := time.Now()
			err := tc.call(NewStore(kube, "ns").For("s"))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
			}
			if tc.wantN == 1 && !apierrors.IsForbidden(err) {
				t.Errorf("error %v does not wrap the Forbidden", err)
			}
			if updates != tc.wantN {
				t.Errorf("%d updates, want %d", updates, tc.wantN)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("the attempts took %s: they should not wait", d)
			}
		})
	}
}
