package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Sources are what the scrape-time series read, as kube-state-metrics counts objects: each series
// is exact at each scrape, with no bookkeeping in the reconcilers.
type Sources struct {
	// Reader lists InfraResources, InfraClaims and InfraRunnerPools (the manager's cache).
	Reader client.Reader
	// Locks returns when each state lock held now was taken (statebackend.HeldLocks: one LIST
	// of the state Leases per scrape).
	Locks func(ctx context.Context) ([]time.Time, error)
	// Elected is closed once this manager leads (manager.Elected()).
	Elected <-chan struct{}
	// SyncInterval is the manager's --sync-interval, exported as conductor_tf_sync_interval_seconds
	// so that an alert on resources not synced follows it; zero leaves the series out.
	SyncInterval time.Duration
}

// scrapeTimeout bounds the reads of one scrape.
const scrapeTimeout = 5 * time.Second

// holdReasons are the reasons a plan waits (status.pendingPlan.reason: the Hold* reasons, policy
// holds and refusals included); each has a series from the start, so that a dashboard and an
// alert see zero rather than nothing.
var holdReasons = []string{v1alpha1.HoldManual, v1alpha1.HoldDestructive, v1alpha1.HoldImportedReplaced, v1alpha1.HoldInterruptedCreate,
	v1alpha1.HoldPolicyApproval, v1alpha1.HoldPolicyDenied}

var (
	approvalsDesc = prometheus.NewDesc("conductor_tf_approvals_pending",
		"InfraResources with a plan waiting for approval, by reason (Manual, DestructiveChange, ImportedObjectReplaced, InterruptedCreate, PolicyRequiresApproval, PolicyDenied).", []string{"reason"}, nil)
	approvalAgeDesc = prometheus.NewDesc("conductor_tf_approval_oldest_pending_seconds",
		"Age in seconds of the oldest plan waiting for approval, by reason (0 when none waits).", []string{"reason"}, nil)
	resourcesDesc = prometheus.NewDesc("conductor_tf_resources",
		"InfraResources by status.phase (an empty phase is reported as Pending).", []string{"phase"}, nil)
	claimsDesc = prometheus.NewDesc("conductor_tf_claims",
		"InfraClaims by namespace and status.phase (an empty phase is reported as Pending).", []string{"namespace", "phase"}, nil)
	lastSyncedDesc = prometheus.NewDesc("conductor_tf_resource_last_synced_timestamp_seconds",
		"When the resource's last successful plan or apply ended (Unix seconds); its creation when it never had one.", []string{"resource"}, nil)
	poolRunnersDesc = prometheus.NewDesc("conductor_tf_runner_pool_connected_runners",
		"Runners of the InfraRunnerPool connected to the manager's run protocol (status.connectedRunners).", []string{"pool"}, nil)
	readyPoolDesc = prometheus.NewDesc("conductor_tf_ready_pool_resources",
		"Resources of an InfraClass's ready pool, by state: ready (Available to a claim) or provisioning (status.readyPool).", []string{"class", "state"}, nil)
	locksHeldDesc = prometheus.NewDesc("conductor_tf_state_locks_held",
		"State locks held now (state Leases with a holder in the controller's namespace).", nil, nil)
	lockAgeDesc = prometheus.NewDesc("conductor_tf_state_lock_oldest_age_seconds",
		"Age in seconds of the oldest state lock held now (0 when none is held).", nil, nil)
)

// objectCollector reads the API's objects from the cache at scrape time.
type objectCollector struct {
	reader client.Reader
	now    func() time.Time
}

func (c *objectCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{resourcesDesc, approvalsDesc, approvalAgeDesc, lastSyncedDesc, claimsDesc, poolRunnersDesc, readyPoolDesc} {
		ch <- d
	}
}

func (c *objectCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	var resources v1alpha1.InfraResourceList
	if err := c.reader.List(ctx, &resources); err != nil {
		ch <- prometheus.NewInvalidMetric(resourcesDesc, err)
	} else {
		c.collectResources(ch, resources.Items)
	}
	var claims v1alpha1.InfraClaimList
	if err := c.reader.List(ctx, &claims); err != nil {
		ch <- prometheus.NewInvalidMetric(claimsDesc, err)
	} else {
		type key struct{ ns, phase string }
		counts := map[key]int{}
		for i := range claims.Items {
			phase := string(claims.Items[i].Status.Phase)
			if phase == "" {
				phase = string(v1alpha1.ClaimPending)
			}
			counts[key{claims.Items[i].Namespace, phase}]++
		}
		for k, n := range counts {
			ch <- prometheus.MustNewConstMetric(claimsDesc, prometheus.GaugeValue, float64(n), k.ns, k.phase)
		}
	}
	var pools v1alpha1.InfraRunnerPoolList
	if err := c.reader.List(ctx, &pools); err != nil {
		ch <- prometheus.NewInvalidMetric(poolRunnersDesc, err)
	} else {
		for i := range pools.Items {
			ch <- prometheus.MustNewConstMetric(poolRunnersDesc, prometheus.GaugeValue, float64(pools.Items[i].Status.ConnectedRunners), pools.Items[i].Name)
		}
	}
	c.collectReadyPools(ctx, ch)
}

// collectReadyPools: conductor_tf_ready_pool_resources of every class that keeps a ready pool.
func (c *objectCollector) collectReadyPools(ctx context.Context, ch chan<- prometheus.Metric) {
	var classes v1alpha1.InfraClassList
	if err := c.reader.List(ctx, &classes); err != nil {
		ch <- prometheus.NewInvalidMetric(readyPoolDesc, err)
		return
	}
	for i := range classes.Items {
		class := &classes.Items[i]
		st := class.Status.ReadyPool
		if st == nil && class.Spec.ReadyPool == nil {
			continue
		}
		if st == nil {
			st = &v1alpha1.ReadyPoolStatus{}
		}
		ch <- prometheus.MustNewConstMetric(readyPoolDesc, prometheus.GaugeValue, float64(st.Ready), class.Name, "ready")
		ch <- prometheus.MustNewConstMetric(readyPoolDesc, prometheus.GaugeValue, float64(st.Provisioning), class.Name, "provisioning")
	}
}

// collectResources: conductor_tf_resources (every phase, zero included), the holds by reason with
// their oldest age, and each resource's last successful sync.
func (c *objectCollector) collectResources(ch chan<- prometheus.Metric, items []v1alpha1.InfraResource) {
	now := c.now()
	pending, oldest := map[string]int{}, map[string]float64{}
	for _, r := range holdReasons {
		pending[r], oldest[r] = 0, 0
	}
	counts := map[v1alpha1.ResourcePhase]int{}
	for _, phase := range []v1alpha1.ResourcePhase{v1alpha1.ResourcePending, v1alpha1.ResourceProvisioning,
		v1alpha1.ResourceAvailable, v1alpha1.ResourceBound, v1alpha1.ResourceReleased, v1alpha1.ResourceDeleting, v1alpha1.ResourceFailed,
		v1alpha1.ResourceLost} {
		counts[phase] = 0
	}
	for i := range items {
		res := &items[i]
		if pp := res.Status.PendingPlan; pp != nil {
			pending[pp.Reason]++
			oldest[pp.Reason] = max(oldest[pp.Reason], now.Sub(pp.CreatedAt.Time).Seconds())
		}
		phase := res.Status.Phase
		if phase == "" {
			phase = v1alpha1.ResourcePending
		}
		counts[phase]++
		if res.DeletionTimestamp == nil {
			ch <- prometheus.MustNewConstMetric(lastSyncedDesc, prometheus.GaugeValue, float64(lastSynced(res).Unix()), res.Name)
		}
	}
	for reason, n := range pending {
		ch <- prometheus.MustNewConstMetric(approvalsDesc, prometheus.GaugeValue, float64(n), reason)
		ch <- prometheus.MustNewConstMetric(approvalAgeDesc, prometheus.GaugeValue, oldest[reason], reason)
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(resourcesDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
}

// lastSynced is when the resource's last successful run ended (status.lastRun and status.runs,
// result Succeeded), or its creation when it had none.
func lastSynced(res *v1alpha1.InfraResource) time.Time {
	t := res.CreationTimestamp.Time
	for _, run := range res.Status.RunHistory() {
		if run.Result == v1alpha1.RunSucceeded && run.CompletionTime != nil && run.CompletionTime.After(t) {
			t = run.CompletionTime.Time
		}
	}
	return t
}

// lockCollector reports the state locks held at scrape time.
type lockCollector struct {
	locks func(ctx context.Context) ([]time.Time, error)
	now   func() time.Time
}

func (c *lockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- locksHeldDesc
	ch <- lockAgeDesc
}

func (c *lockCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	taken, err := c.locks(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(locksHeldDesc, err)
		return
	}
	oldest := 0.0
	for _, t := range taken {
		if !t.IsZero() {
			oldest = max(oldest, c.now().Sub(t).Seconds())
		}
	}
	ch <- prometheus.MustNewConstMetric(locksHeldDesc, prometheus.GaugeValue, float64(len(taken)))
	ch <- prometheus.MustNewConstMetric(lockAgeDesc, prometheus.GaugeValue, oldest)
}
