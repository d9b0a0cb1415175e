// Package metrics defines conductor-tf's Prometheus series and registers them with
// controller-runtime's registry (sigs.k8s.io/controller-runtime/pkg/metrics.Registry), so the
// manager's metrics endpoint serves them beside controller-runtime's own workqueue and reconcile
// series. Names and units follow the Prometheus conventions: a `conductor_tf_` prefix, seconds for
// durations, `_total` for counters.
//
// The series:
//
//	conductor_tf_run_duration_seconds{operation,result}  histogram  one Terraform run, slot held
//	conductor_tf_runs_in_flight                          gauge      runs holding a pool slot
//	conductor_tf_run_wait_seconds                        histogram  time a run waited for a slot
//	conductor_tf_claim_ready_seconds                     histogram  claim creation → first Ready
//	conductor_tf_resources{phase}                        gauge      InfraResources by status.phase
//	conductor_tf_state_lock_conflicts_total              counter    runs refused by a held state lock
//	conductor_tf_state_locks_recovered_total             counter    stale locks of dead runs released
//	conductor_tf_drift_detected_total{policy}            counter    drift checks that found drift
//	conductor_tf_approvals_pending{reason}               gauge      plans waiting for approval
package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// runBuckets span a second-long apply of a small module to a half-hour database creation (seconds).
var runBuckets = []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800}

var (
	runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "conductor_tf_run_duration_seconds",
		Help:    "Duration of Terraform runs in seconds, by operation (apply, plan, destroy) and result (Succeeded, Failed, Cancelled, …).",
		Buckets: runBuckets,
	}, []string{"operation", "result"})
	runsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "conductor_tf_runs_in_flight",
		Help: "Terraform runs holding a slot of the runner pool now.",
	})
	runWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "conductor_tf_run_wait_seconds",
		Help:    "Time a run waited for a slot of the runner pool, in seconds.",
		Buckets: []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900},
	})
	claimReady = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "conductor_tf_claim_ready_seconds",
		Help:    "Time from a claim's creation to its first Ready condition, in seconds.",
		Buckets: runBuckets,
	})
	lockConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "conductor_tf_state_lock_conflicts_total",
		Help: "Runs that found their state locked by another holder or a live run.",
	})
	locksRecovered = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "conductor_tf_state_locks_recovered_total",
		Help: "State locks left by dead runs of this deployment that the leader released.",
	})
	driftDetected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "conductor_tf_drift_detected_total",
		Help: "Drift checks that found the infrastructure changed outside Terraform, by driftPolicy.",
	}, []string{"policy"})
	approvalsDesc = prometheus.NewDesc("conductor_tf_approvals_pending",
		"InfraResources with a plan waiting for approval, by reason (Manual, DestructiveChange, ImportedObjectReplaced, InterruptedCreate).", []string{"reason"}, nil)
	resourcesDesc = prometheus.NewDesc("conductor_tf_resources",
		"InfraResources by status.phase (an empty phase is reported as Pending).", []string{"phase"}, nil)
)

var registerOnce sync.Once

// Register adds the series to controller-runtime's registry; calling it again does nothing.
// reader lists InfraResources at scrape time for conductor_tf_resources (the manager's cache);
// nil leaves that series out.
func Register(reader client.Reader) {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(runDuration, runsInFlight, runWait, claimReady, lockConflicts, locksRecovered, driftDetected)
		if reader != nil {
			ctrlmetrics.Registry.MustRegister(&phaseCollector{reader: reader})
		}
	})
}

// ObserveRun records one finished run: operation (apply, plan, destroy), result, and duration.
func ObserveRun(operation, result string, d time.Duration) {
	runDuration.WithLabelValues(operation, result).Observe(d.Seconds())
}

// DriftDetected counts a drift check that found drift, under the resource's driftPolicy.
func DriftDetected(policy string) { driftDetected.WithLabelValues(policy).Inc() }

// LockConflict counts a run refused because its state was locked by someone else or a live run.
func LockConflict() { lockConflicts.Inc() }

// LockRecovered counts a stale lock of a dead run released by the leader.
func LockRecovered() { locksRecovered.Inc() }

// Pool implements tfrunner.Observer: slot waits and runs in flight.
type Pool struct{}

// SlotAcquired records a run that got a slot after waiting wait.
func (Pool) SlotAcquired(wait time.Duration) {
	runWait.Observe(wait.Seconds())
	runsInFlight.Inc()
}

// SlotReleased records a run that gave its slot back.
func (Pool) SlotReleased() { runsInFlight.Dec() }

// ClaimReady observes claims' first Ready transition, once per claim (by UID) for the life of the
// process; a claim that was already Ready when the controller started is not observed again.
type ClaimReady struct {
	mu   sync.Mutex
	seen map[types.UID]struct{}
}

// Observe records the claim's creation → now when it has just become Ready for the first time.
func (c *ClaimReady) Observe(claim *v1alpha1.InfraClaim, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[types.UID]struct{}{}
	}
	if _, ok := c.seen[claim.UID]; ok {
		return
	}
	c.seen[claim.UID] = struct{}{}
	claimReady.Observe(now.Sub(claim.CreationTimestamp.Time).Seconds())
}

// Forget drops a deleted claim.
func (c *ClaimReady) Forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, uid)
}

// phaseCollector counts InfraResources by phase when scraped, from the reader (the cache), as
// kube-state-metrics counts objects: the series is exact at each scrape, with no bookkeeping.
type phaseCollector struct{ reader client.Reader }

func (p *phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- resourcesDesc
	ch <- approvalsDesc
}

func (p *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list v1alpha1.InfraResourceList
	if err := p.reader.List(ctx, &list); err != nil {
		ch <- prometheus.NewInvalidMetric(resourcesDesc, err)
		return
	}
	pending := map[string]int{"Manual": 0, "DestructiveChange": 0, "ImportedObjectReplaced": 0, "InterruptedCreate": 0}
	for i := range list.Items {
		if pp := list.Items[i].Status.PendingPlan; pp != nil {
			pending[pp.Reason]++
		}
	}
	for reason, n := range pending {
		ch <- prometheus.MustNewConstMetric(approvalsDesc, prometheus.GaugeValue, float64(n), reason)
	}
	counts := map[v1alpha1.ResourcePhase]int{}
	for _, phase := range []v1alpha1.ResourcePhase{v1alpha1.ResourcePending, v1alpha1.ResourceProvisioning,
		v1alpha1.ResourceAvailable, v1alpha1.ResourceBound, v1alpha1.ResourceReleased, v1alpha1.ResourceDeleting, v1alpha1.ResourceFailed} {
		counts[phase] = 0
	}
	for i := range list.Items {
		phase := list.Items[i].Status.Phase
		if phase == "" {
			phase = v1alpha1.ResourcePending
		}
		counts[phase]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(resourcesDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
}
