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
//	conductor_tf_approval_oldest_pending_seconds{reason} gauge      age of the oldest plan waiting, per reason
//	conductor_tf_claims{namespace,phase}                 gauge      InfraClaims by namespace and status.phase
//	conductor_tf_resource_last_synced_timestamp_seconds{resource}  gauge  last successful run (Unix s)
//	conductor_tf_runner_pool_connected_runners{pool}     gauge      runners connected per InfraRunnerPool
//	conductor_tf_ready_pool_resources{class,state}       gauge      a class's ready pool: ready, provisioning
//	conductor_tf_ready_pool_binds_total{class}           counter    claims bound to a ready pool's resource
//	conductor_tf_state_locks_held                        gauge      state locks held now
//	conductor_tf_state_lock_oldest_age_seconds           gauge      age of the oldest held state lock
//	conductor_tf_leader                                  gauge      1 while this manager is the leader
//	conductor_tf_sync_interval_seconds                   gauge      the manager's --sync-interval
//	conductor_tf_run_sandbox_info{mode,abi,signals_scoped,sockets_mediated}  gauge  how runs are confined
//	conductor_tf_shard_members                           gauge      live replicas sharing resources (--shard-buckets; 0 without)
//	conductor_tf_shard_buckets{state}                    gauge      buckets held, releasing, total (this replica)
//	conductor_tf_shard_reconciles_in_flight              gauge      resource reconciles under way in its buckets
//	conductor_tf_shard_resources                         gauge      InfraResources in its buckets: its share
//
// The run's wait in line (conductor_tf_run_wait_seconds) and its duration
// (conductor_tf_run_duration_seconds) are apart: a run's duration starts when it got its slot.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
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
	leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "conductor_tf_leader",
		Help: "1 while this manager process is the elected leader (it runs reconciles), 0 otherwise.",
	})
	runSandbox = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "conductor_tf_run_sandbox_info",
		Help: "1, labelled with how runs are confined: mode (landlock or none), the kernel's Landlock abi, whether signals to processes outside a run are refused (signals_scoped, ABI 6+) and whether connects to Unix sockets are mediated (sockets_mediated, ABI 9+).",
	}, []string{"mode", "abi", "signals_scoped", "sockets_mediated"})
	readyPoolBinds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "conductor_tf_ready_pool_binds_total",
		Help: "Claims bound to a ready resource of their class's ready pool (spec.readyPool), by class.",
	}, []string{"class"})
	policyViolations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "conductor_tf_policy_violations_total",
		Help: "Saved plans a rule of their class's plan policy stopped, counted once per plan, by class, rule and outcome (PolicyDenied, PolicyRequiresApproval, or DestructiveChange for the guard).",
	}, []string{"class", "rule", "outcome"})
	syncInterval = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "conductor_tf_sync_interval_seconds",
		Help: "How often an unchanged resource is planned again (the manager's --sync-interval), in seconds.",
	})
)

var registerOnce sync.Once

// Register adds the series to controller-runtime's registry; calling it again does nothing. The
// scrape-time series read src (collectors.go); a nil source leaves its series out. When
// src.Elected is set, conductor_tf_leader turns 1 once it is closed.
func Register(src Sources) {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(runDuration, runsInFlight, runWait, claimReady, lockConflicts, locksRecovered, driftDetected, leader, runSandbox, readyPoolBinds, policyViolations, shards)
		// Every policy has a series from the start: a dashboard sees zero, not "no data".
		for _, p := range []v1alpha1.DriftPolicy{v1alpha1.DriftCorrect, v1alpha1.DriftReport} {
			driftDetected.WithLabelValues(string(p))
		}
		if src.Reader != nil {
			ctrlmetrics.Registry.MustRegister(&objectCollector{reader: src.Reader, now: time.Now})
		}
		if src.Locks != nil {
			ctrlmetrics.Registry.MustRegister(&lockCollector{locks: src.Locks, now: time.Now})
		}
		if src.SyncInterval > 0 {
			syncInterval.Set(src.SyncInterval.Seconds())
			ctrlmetrics.Registry.MustRegister(syncInterval)
		}
		if src.Elected != nil {
			go func() {
				<-src.Elected
				leader.Set(1)
			}()
		}
	})
}

// SetRunSandbox records how runs are confined (conductor_tf_run_sandbox_info): mode is "landlock"
// or "none", abi the kernel's Landlock ABI (0 without Landlock). Only the last call's series is kept.
func SetRunSandbox(mode string, abi int, signalsScoped, socketsMediated bool) {
	runSandbox.Reset()
	runSandbox.WithLabelValues(mode, strconv.Itoa(abi), strconv.FormatBool(signalsScoped), strconv.FormatBool(socketsMediated)).Set(1)
}

// ObserveRun records one finished run: operation (apply, plan, destroy), result, and duration
// from its start (it got its runner slot) to its end.
func ObserveRun(operation, result string, d time.Duration) {
	runDuration.WithLabelValues(operation, result).Observe(d.Seconds())
}

// DriftDetected counts a drift check that found drift, under the resource's driftPolicy.
func DriftDetected(policy string) { driftDetected.WithLabelValues(policy).Inc() }

// ReadyPoolBind counts a claim bound to a ready resource of class's ready pool.
func ReadyPoolBind(class string) { readyPoolBinds.WithLabelValues(class).Inc() }

// PolicyViolation counts a saved plan that rule of class's plan policy stopped, with the hold's
// reason (outcome); class is "" for a resource without one.
func PolicyViolation(class, rule, outcome string) {
	policyViolations.WithLabelValues(class, rule, outcome).Inc()
}

// LockConflict counts a run refused because its state was locked by someone else or a live run.
func LockConflict() { lockConflicts.Inc() }

// LockRecovered counts a stale lock of a dead run released by the leader.
func LockRecovered() { locksRecovered.Inc() }

// ObserveRunWait records a run's wait in line: from being recorded (status.lastRun.queuedTime) to
// getting its runner slot (startTime), in the manager's pool or a runner pool alike.
func ObserveRunWait(d time.Duration) { runWait.Observe(d.Seconds()) }

// Pool implements tfrunner.Observer: runs in flight in the manager's pool. (Their wait in line is
// observed by the controller, ObserveRunWait, for every pool.)
type Pool struct{}

// SlotAcquired records a run that got a slot.
func (Pool) SlotAcquired(time.Duration) { runsInFlight.Inc() }

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
