//go:build scale

package scale_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// waitClaimsReady returns once count claims of namespace ns are Ready, or fails the test after
// timeout. It lists the claims once and then follows one watch from that list's resourceVersion
// (listing again only when the watch ends), as kubectl wait does: the benchmark's waiting costs the
// API server one watch, not a LIST of every claim every 50 ms — which, on the same two cores as the
// controller and the runs, was a fifth of the API server's CPU in the controller's time (the
// baselines poll nothing).
func waitClaimsReady(t *testing.T, ctx context.Context, w client.WithWatch, ns string, count int, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ready := map[string]bool{}
	done := func() bool {
		n := 0
		for _, r := range ready {
			if r {
				n++
			}
		}
		return n >= count
	}
	isReady := func(c *v1alpha1.InfraClaim) bool {
		return meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionReady)
	}
	for ctx.Err() == nil {
		var list v1alpha1.InfraClaimList
		if err := w.List(ctx, &list, client.InNamespace(ns)); err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i := range list.Items {
			ready[list.Items[i].Name] = isReady(&list.Items[i])
		}
		if done() {
			return
		}
		events, err := w.Watch(ctx, &v1alpha1.InfraClaimList{}, client.InNamespace(ns),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true}})
		if err != nil {
			continue
		}
		for ev := range events.ResultChan() {
			c, ok := ev.Object.(*v1alpha1.InfraClaim)
			if !ok { // an error event (an expired resourceVersion): list again
				break
			}
			if ev.Type != watch.Bookmark {
				ready[c.Name] = ev.Type != watch.Deleted && isReady(c)
			}
			if done() {
				events.Stop()
				return
			}
		}
		events.Stop()
	}
	t.Fatalf("%d claims of %s not Ready after %s", count, ns, timeout)
}
