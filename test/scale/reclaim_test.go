//go:build scale

package scale_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// massDeletion deletes every claim of namespace ns at once, as a platform team tearing an
// environment down does, and waits until every resource of kind is gone (reclaim policy Delete:
// destroy, then the state, then the object). It fails the test when a resource is left, or when
// any resource reported its state missing (reason StateMissing): a reclaim must never take the
// state it deleted itself for a lost one (issue 31). It returns the time from the deletions to
// the last resource gone.
func massDeletion(t *testing.T, ctx context.Context, k8s client.Client, ns, kind string, count int) time.Duration {
	t.Helper()
	start := time.Now()
	parallel(count, 16, func(i int) error {
		c := &v1alpha1.InfraClaim{}
		c.Namespace, c.Name = ns, fmt.Sprintf("pet-%04d", i)
		return client.IgnoreNotFound(k8s.Delete(ctx, c))
	})
	deadline := time.Now().Add(time.Duration(count) * 10 * time.Second)
	left := -1
	for time.Now().Before(deadline) {
		var list v1alpha1.InfraResourceList
		if err := k8s.List(ctx, &list); err == nil {
			left = 0
			for _, r := range list.Items {
				if r.Spec.ResourceKind == kind {
					left++
				}
			}
			if left == 0 {
				break
			}
		}
		if missing := stateMissingEvents(t, ctx, k8s); missing > 0 {
			t.Errorf("%d resources reported StateMissing during the mass deletion", missing)
			return time.Since(start)
		}
		time.Sleep(200 * time.Millisecond)
	}
	took := time.Since(start)
	if left != 0 {
		t.Errorf("%d of %d resources are left %s after their claims were deleted", left, count, took.Round(time.Second))
	}
	if missing := stateMissingEvents(t, ctx, k8s); missing > 0 {
		t.Errorf("%d resources reported StateMissing during the mass deletion", missing)
	}
	return took
}

// stateMissingEvents counts the distinct resources with an event of reason StateMissing.
func stateMissingEvents(t *testing.T, ctx context.Context, k8s client.Client) int {
	var events eventsv1.EventList
	if err := k8s.List(ctx, &events); err != nil {
		t.Logf("listing events: %v", err)
		return 0
	}
	seen := map[string]bool{}
	for _, e := range events.Items {
		if e.Reason == v1alpha1.ReasonStateMissing {
			seen[e.Regarding.Name] = true
		}
	}
	return len(seen)
}
