//go:build scale

package scale_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// runTimes are, over the resources of kind, the first apply's wait in line (status queuedTime →
// startTime) and its run (startTime → completionTime), as status records them: what the
// dashboard's queue-wait and run-duration panels show.
func runTimes(t *testing.T, ctx context.Context, k8s client.Client, kind string) (wait, run []time.Duration) {
	var list v1alpha1.InfraResourceList
	if err := k8s.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		if r.Spec.ResourceKind != kind {
			continue
		}
		for _, x := range r.Status.RunHistory() {
			if x.Operation != "apply" || x.Result != v1alpha1.RunSucceeded || x.QueuedTime == nil || x.StartTime == nil || x.CompletionTime == nil {
				continue
			}
			wait = append(wait, x.StartTime.Sub(x.QueuedTime.Time))
			run = append(run, x.CompletionTime.Sub(x.StartTime.Time))
			break
		}
	}
	return wait, run
}
