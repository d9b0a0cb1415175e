package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func TestObjectCollector(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	synced := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "synced", CreationTimestamp: *at(time.Hour)},
		Status: v1alpha1.InfraResourceStatus{Phase: v1alpha1.ResourceBound,
			// The last run failed: the last sync is the one before, in the history.
			LastRun: &v1alpha1.RunStatus{Result: v1alpha1.RunFailed, CompletionTime: at(time.Minute)},
			Runs:    []v1alpha1.RunStatus{{Result: v1alpha1.RunSucceeded, CompletionTime: at(10 * time.Minute)}, {Result: v1alpha1.RunSucceeded, CompletionTime: at(30 * time.Minute)}}}}
	held := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "held", CreationTimestamp: *at(2 * time.Hour)},
		Status: v1alpha1.InfraResourceStatus{PendingPlan: &v1alpha1.PendingPlan{Reason: "DestructiveChange", CreatedAt: *at(90 * time.Second)}}}
	c := &objectCollector{now: func() time.Time { return now }, reader: fake.NewClientBuilder().WithScheme(scheme).WithObjects(synced, held,
		&v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x"}, Status: v1alpha1.InfraClaimStatus{Phase: v1alpha1.ClaimBound}},
		&v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "y"}},
		&v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "z"}, Status: v1alpha1.InfraClaimStatus{Phase: v1alpha1.ClaimBound}},
		&v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Status: v1alpha1.InfraRunnerPoolStatus{ConnectedRunners: 3}},
	).Build()}
	want := `
# HELP conductor_tf_approval_oldest_pending_seconds Age in seconds of the oldest plan waiting for approval, by reason (0 when none waits).
# TYPE conductor_tf_approval_oldest_pending_seconds gauge
conductor_tf_approval_oldest_pending_seconds{reason="DestructiveChange"} 90
conductor_tf_approval_oldest_pending_seconds{reason="ImportedObjectReplaced"} 0
conductor_tf_approval_oldest_pending_seconds{reason="InterruptedCreate"} 0
conductor_tf_approval_oldest_pending_seconds{reason="Manual"} 0
conductor_tf_approval_oldest_pending_seconds{reason="PolicyDenied"} 0
conductor_tf_approval_oldest_pending_seconds{reason="PolicyRequiresApproval"} 0
# HELP conductor_tf_claims InfraClaims by namespace and status.phase (an empty phase is reported as Pending).
# TYPE conductor_tf_claims gauge
conductor_tf_claims{namespace="a",phase="Bound"} 1
conductor_tf_claims{namespace="a",phase="Pending"} 1
conductor_tf_claims{namespace="b",phase="Bound"} 1
# HELP conductor_tf_resource_last_synced_timestamp_seconds When the resource's last successful plan or apply ended (Unix seconds); its creation when it never had one.
# TYPE conductor_tf_resource_last_synced_timestamp_seconds gauge
conductor_tf_resource_last_synced_timestamp_seconds{resource="held"} 1.7956872e+09
conductor_tf_resource_last_synced_timestamp_seconds{resource="synced"} 1.7956938e+09
# HELP conductor_tf_runner_pool_connected_runners Runners of the InfraRunnerPool connected to the manager's run protocol (status.connectedRunners).
# TYPE conductor_tf_runner_pool_connected_runners gauge
conductor_tf_runner_pool_connected_runners{pool="gpu"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "conductor_tf_approval_oldest_pending_seconds", "conductor_tf_claims",
		"conductor_tf_resource_last_synced_timestamp_seconds", "conductor_tf_runner_pool_connected_runners"); err != nil {
		t.Fatal(err)
	}
}

func TestLockCollector(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	c := &lockCollector{now: func() time.Time { return now }, locks: func(context.Context) ([]time.Time, error) {
		return []time.Time{now.Add(-time.Minute), now.Add(-2 * time.Hour)}, nil
	}}
	want := `
# HELP conductor_tf_state_lock_oldest_age_seconds Age in seconds of the oldest state lock held now (0 when none is held).
# TYPE conductor_tf_state_lock_oldest_age_seconds gauge
conductor_tf_state_lock_oldest_age_seconds 7200
# HELP conductor_tf_state_locks_held State locks held now (state Leases with a holder in the controller's namespace).
# TYPE conductor_tf_state_locks_held gauge
conductor_tf_state_locks_held 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	// A LIST the API server refuses fails the scrape (an invalid metric), rather than reporting zero.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&lockCollector{now: time.Now, locks: func(context.Context) ([]time.Time, error) { return nil, errors.New("forbidden") }})
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("gather: %v; want the LIST's error", err)
	}
}
