package shard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Labels and names of the Leases a Coordinator keeps in its namespace.
const (
	// LabelShard marks the shard Leases: "member" or "bucket".
	LabelShard = "conductor.io/shard"
	roleMember = "member"
	roleBucket = "bucket"
	// DefaultBuckets is how many buckets resources are divided into when Options.Buckets is zero.
	DefaultBuckets = 256
)

// ErrMembershipLost is what Start returns when this replica could not renew its member Lease for
// RenewDeadline: other replicas may take its buckets once LeaseDuration has passed, so it stops
// serving them now and its process ends (as on a lost leader election).
var ErrMembershipLost = errors.New("shard membership lost: this replica's member Lease was not renewed within the renew deadline")

// Options configure a Coordinator. Durations are those of leader election (client-go's
// leaderelection.LeaderElectionConfig), with the same meaning for the member Lease.
type Options struct {
	Kube      kubernetes.Interface
	Namespace string
	// Pod names this replica's member Lease (conductor-tf-member-<Pod>); Identity is what its
	// holderIdentity and the bucket Leases it holds say (the pod and a random suffix, as the leader
	// Lease's).
	Pod, Identity string
	// Buckets is how many buckets keys hash into (DefaultBuckets when zero). Every replica must use
	// the same number.
	Buckets int
	// LeaseDuration: a member not seen renewing for this long is dead (15 s when zero).
	// RenewDeadline: a replica that has not renewed for this long serves nothing (10 s when zero).
	// RetryPeriod: how often the member Lease is renewed and the buckets reassigned (2 s when zero).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnAcquired, when set, is called from the Coordinator's goroutine with the buckets taken in
	// one period, and those whose handover was called off (Enter refused their reconciles while
	// they were handed over): their resources have to be reconciled here now.
	OnAcquired func(buckets []int)
	// OnLost, when set, is called with the buckets this replica stopped holding without handing
	// them back: another replica took them, their Lease was deleted or replaced under it, or its
	// membership lapsed (membership true: every bucket it held, and Start is about to return
	// ErrMembershipLost). The runs of their resources must be killed at once (SIGKILL): another
	// replica may run them soon. It is called before the lost channels of their admitted
	// reconciles close, from the Coordinator's goroutines, and must not block.
	OnLost func(buckets []int, membership bool)
	// OnTake, when set, is called with a bucket just taken before it is served (Enter and Serves
	// refuse it until OnTake returned): what the last holder left for its resources must be seen
	// before the first reconcile of them (the state server lists pending states again).
	OnTake func(bucket int)
	// Settle, when set, is called before a bucket is handed back, once no reconcile of it is under
	// way: it stores what this replica still holds for the bucket's resources (their pending
	// states) and reports whether anything is left. A bucket not settled is kept, admitting no
	// reconcile, and asked again next period.
	Settle func(bucket int) bool
}

// KillLatency bounds how long after its renew deadline a replica takes to have killed the runs of
// the buckets it lost (OnLost): the watchdog's timer firing late, and the runs' processes found in
// /proc and sent SIGKILL. Fence adds it to the lease duration.
const KillLatency = 2 * time.Second

// Fence is how long a replica that took a bucket leaves the locks of its predecessor's runs alone,
// counted from the take (Since): the lease duration (by then the predecessor has been past its
// renew deadline for LeaseDuration − RenewDeadline) plus KillLatency, so that a dead run's lock is
// released only once its process is dead. Durations as Options', defaults applied.
func (o Options) Fence() time.Duration {
	return orDefault(o.LeaseDuration, 15*time.Second) + KillLatency
}

// Validate returns an error unless RetryPeriod < RenewDeadline and RenewDeadline + KillLatency <
// LeaseDuration (defaults applied): a replica must stop, and kill its runs, before the others may
// take its buckets; client-go's leader election makes the same demand of its durations.
func (o Options) Validate() error {
	lease, renew, retry := orDefault(o.LeaseDuration, 15*time.Second), orDefault(o.RenewDeadline, 10*time.Second), orDefault(o.RetryPeriod, 2*time.Second)
	if retry >= renew || renew+KillLatency >= lease {
		return fmt.Errorf("shard durations: want retry period (%s) < renew deadline (%s) and renew deadline + kill latency (%s) < lease duration (%s)",
			retry, renew, KillLatency, lease)
	}
	return nil
}

// Coordinator keeps this replica's membership and its buckets (see the package documentation).
// Start runs it; Enter, Serves and Since answer the reconciler and the state server.
type Coordinator struct {
	o      Options
	leases coordinationlisters.LeaseNamespaceLister
	synced cache.InformerSynced
	start  func(stop <-chan struct{})

	mu       sync.Mutex
	renewed  time.Time     // when the last successful renewal of the member Lease began
	owned    map[int]*held // buckets whose Lease names this replica
	members  int           // live members at the last period, this one included
	stopping bool          // shutting down: every bucket is being released
	lapsed   bool          // the membership lapsed (watch): nothing is served any more
	// lapse is closed when the membership lapsed: Start returns ErrMembershipLost.
	lapse chan struct{}

	// Used by the renewal's goroutine only (renewLoop).
	self *coordinationv1.Lease // the member Lease as last written
	// Used by the Coordinator's goroutine only.
	seen map[string]sighting // the last sign of life of each identity, by this process's clock
}

// held is a bucket this replica holds.
type held struct {
	since     time.Time             // when it was taken (the reconciler's fences count from it)
	epoch     int32                 // the bucket Lease's leaseTransitions when taken
	lease     *coordinationv1.Lease // the bucket Lease as written then
	releasing bool                  // no reconcile is admitted: it goes once inflight is 0
	inflight  int                   // reconciles admitted (Enter) and not done
	// handover is closed when the bucket begins to be handed over (releasing set); a new one
	// replaces it when the handover is called off.
	handover chan struct{}
	// lost is closed when the bucket is dropped without being handed back (dropLocked): the
	// admitted reconciles must stop, their runs are being killed.
	lost chan struct{}
}

func newHeld(since time.Time, epoch int32, lease *coordinationv1.Lease) *held {
	return &held{since: since, epoch: epoch, lease: lease, handover: make(chan struct{}), lost: make(chan struct{})}
}

// setReleasing sets h.releasing, closing or replacing h.handover to match (under Coordinator.mu).
func (h *held) setReleasing(v bool) {
	switch {
	case v && !h.releasing:
		close(h.handover)
	case !v && h.releasing:
		h.handover = make(chan struct{})
	}
	h.releasing = v
}

// sighting is when an identity's member Lease was first seen with its current renewTime (or, for
// a holder without one, when that was first noticed).
type sighting struct {
	renew string
	at    time.Time
}

// New returns a Coordinator for o (defaults applied); Start runs it.
func New(o Options) *Coordinator {
	if o.Buckets <= 0 {
		o.Buckets = DefaultBuckets
	}
	o.LeaseDuration = orDefault(o.LeaseDuration, 15*time.Second)
	o.RenewDeadline = orDefault(o.RenewDeadline, 10*time.Second)
	o.RetryPeriod = orDefault(o.RetryPeriod, 2*time.Second)
	f := informers.NewSharedInformerFactoryWithOptions(o.Kube, 0, informers.WithNamespace(o.Namespace),
		informers.WithTweakListOptions(func(l *metav1.ListOptions) { l.LabelSelector = LabelShard }))
	inf := f.Coordination().V1().Leases()
	c := &Coordinator{o: o, leases: inf.Lister().Leases(o.Namespace), synced: inf.Informer().HasSynced,
		owned: map[int]*held{}, seen: map[string]sighting{}, lapse: make(chan struct{})}
	c.start = f.Start
	return c
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// NeedLeaderElection is false: every replica runs its Coordinator (controller-runtime's
// LeaderElectionRunnable).
func (c *Coordinator) NeedLeaderElection() bool { return false }

// Buckets is the number of buckets.
func (c *Coordinator) Buckets() int { return c.o.Buckets }

// Identity is this replica's identity in the Leases.
func (c *Coordinator) Identity() string { return c.o.Identity }

// Bucket is the bucket of key (FNV-64a of key, modulo Buckets).
func (c *Coordinator) Bucket(key string) int { return bucketOf(key, c.o.Buckets) }

func bucketOf(key string, n int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum64() % uint64(n))
}

// owner is the member of members (identities) that scores highest for bucket b: rendezvous
// hashing, the score being splitmix64's finalizer over FNV-64a of the identity mixed with b (FNV
// alone spreads strings that differ in their last bytes badly over its high bits), ties to the
// smaller identity. "" when members is empty.
func owner(members []string, b int) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		h := fnv.New64a()
		_, _ = h.Write([]byte(m))
		if s := mix(h.Sum64() ^ (uint64(b)+1)*0x9e3779b97f4a7c15); best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// mix is splitmix64's finalizer (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014): every input bit changes every output bit with probability about 1/2.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// MemberLeaseName is the member Lease of the replica in pod.
func MemberLeaseName(pod string) string { return "conductor-tf-member-" + pod }

// BucketLeaseName is bucket b's Lease: conductor-tf-bucket-NNN.
func BucketLeaseName(b int) string { return fmt.Sprintf("conductor-tf-bucket-%03d", b) }

// Enter admits one reconcile of key's resource: ok when this replica holds key's bucket, is not
// handing it over, and renewed its membership within RenewDeadline. done (when ok) must be called
// when the reconcile ends; a bucket is handed over only once every admitted reconcile is done.
// handover is closed if the bucket begins to be handed over meanwhile: a reconcile whose run has
// not started yet should give it up then, so as not to hold the handover back. lost is closed if
// this replica stops holding the bucket without handing it over (taken by another replica, its
// Lease gone, or the membership lapsed): the reconcile must stop at once and write nothing (its
// runs are killed through OnLost).
func (c *Coordinator) Enter(key string) (done func(), handover, lost <-chan struct{}, ok bool) {
	b := c.Bucket(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.owned[b]
	if h == nil || h.releasing || !c.liveLocked(time.Now()) {
		return nil, nil, nil, false
	}
	h.inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			h.inflight--
			c.mu.Unlock()
		})
	}, h.handover, h.lost, true
}

// Serves reports whether this replica may serve key's state now: it holds key's bucket (handing
// it over included, while its reconciles end) and renewed its membership within RenewDeadline.
func (c *Coordinator) Serves(key string) bool {
	b := c.Bucket(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owned[b] != nil && c.liveLocked(time.Now())
}

// Since is when this replica took key's bucket; the zero time when it does not hold it.
func (c *Coordinator) Since(key string) time.Time {
	b := c.Bucket(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.owned[b]; h != nil {
		return h.since
	}
	return time.Time{}
}

// Status is a Coordinator's view at its last period.
type Status struct {
	Members   int // live members, this one included
	Buckets   int // buckets in all
	Held      int // buckets this replica holds
	Releasing int // of which being handed over
	InFlight  int // reconciles admitted and not done
}

// Status reports the Coordinator's view now.
func (c *Coordinator) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Members: c.members, Buckets: c.o.Buckets, Held: len(c.owned)}
	for _, h := range c.owned {
		if h.releasing {
			s.Releasing++
		}
		s.InFlight += h.inflight
	}
	return s
}

// Held lists the buckets this replica holds, in order.
func (c *Coordinator) Held() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int, 0, len(c.owned))
	for b := range c.owned {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

func (c *Coordinator) liveLocked(now time.Time) bool {
	return !c.lapsed && !c.renewed.IsZero() && now.Sub(c.renewed) < c.o.RenewDeadline
}

// dropLocked forgets bucket b, held without having been handed back, and closes its handover; it
// returns what was held (nil when b was not). Under c.mu; the caller then calls lose with it.
func (c *Coordinator) dropLocked(b int) *held {
	h := c.owned[b]
	if h == nil {
		return nil
	}
	delete(c.owned, b)
	h.setReleasing(true)
	return h
}

// lose tells OnLost of the buckets dropped (dropLocked), then closes their lost channels: the
// runs are killed before their reconciles hear of it. Not under c.mu.
func (c *Coordinator) lose(buckets map[int]*held, membership bool) {
	if len(buckets) == 0 {
		return
	}
	if c.o.OnLost != nil {
		list := make([]int, 0, len(buckets))
		for b := range buckets {
			list = append(list, b)
		}
		slices.Sort(list)
		c.o.OnLost(list, membership)
	}
	for _, h := range buckets {
		close(h.lost)
	}
}

// Start runs the Coordinator until ctx ends (controller-runtime's Runnable): it renews the member
// Lease every RetryPeriod and watches the renewal's deadline on goroutines of their own (renew.go),
// and every RetryPeriod hands buckets over (period). When ctx ends it hands every bucket back (each
// once its reconciles are done, renewing meanwhile with the member Lease marked leaving, so that the
// others take what it hands back at once) and deletes its member Lease, then returns nil. It
// returns ErrMembershipLost once the member Lease went unrenewed for RenewDeadline, whatever the
// period was doing: by then every bucket was dropped and OnLost told.
func (c *Coordinator) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("shard").WithValues("identity", c.o.Identity)
	c.start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return ctx.Err()
	}
	log.Info("sharding resources among the live replicas", "buckets", c.o.Buckets, "memberLease", MemberLeaseName(c.o.Pod))
	stopRenewing, renewing := c.startRenewal(context.WithoutCancel(ctx), log)
	defer stopRenewing()
	t := time.NewTicker(c.o.RetryPeriod)
	defer t.Stop()
	done := ctx.Done()
	for {
		stopping := ctx.Err() != nil
		if stopping {
			c.mu.Lock()
			c.stopping = true
			c.mu.Unlock()
			done = nil // from now on, one period per tick until every bucket is handed back
		}
		c.period(context.WithoutCancel(ctx), log)
		if c.Lapsed() {
			return ErrMembershipLost
		}
		if stopping && c.Status().Held == 0 {
			stopRenewing()
			<-renewing
			c.leave(context.WithoutCancel(ctx), log)
			return nil
		}
		select {
		case <-t.C:
		case <-done:
		case <-c.lapse:
		}
	}
}

// Lapsed reports whether this replica's membership lapsed (its renewal was not renewed for
// RenewDeadline): it serves nothing any more, and Start returns ErrMembershipLost.
func (c *Coordinator) Lapsed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lapsed
}
