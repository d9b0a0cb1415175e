package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader election timing, as controller-runtime's defaults (manager.Options): the lease others
// wait out, how long the leader keeps retrying its renewal before it stops leading, and how often
// it tries.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

// leaderElectionID names the leader Lease (in the controller's namespace).
const leaderElectionID = "conductor-tf.conductor.io"

// leaderClock is the leader election lock (a Lease, through client-go's resourcelock) that also
// records when this process last renewed its leadership: the start of its last successful write
// of the Lease naming itself holder. Leading says whether that is less than renewDeadline ago —
// the window in which client-go's elector still counts itself leader — so that the state server
// refuses runs the moment leadership may have passed to another replica (a process frozen past
// its deadline included), not once controller-runtime gets round to stopping.
type leaderClock struct {
	resourcelock.Interface
	deadline time.Duration

	mu      sync.Mutex
	holding bool      // the last successful write named this process holder
	renewed time.Time // when that write began
	// holder is the identity the Lease named when last read (Get), and seen when that record
	// last changed (the holder renewed it): how a standby knows where the leader is.
	holder resourcelock.LeaderElectionRecord
	seen   time.Time
}

// newLeaderClock builds the Lease lock of the leader election in namespace, for the identity
// <pod>_<random>, with a client whose requests time out at half the renew deadline (as
// controller-runtime's own: one hung request must not cost the leadership).
func newLeaderClock(cfg *rest.Config, namespace, pod string) (*leaderClock, error) {
	cfg = rest.CopyConfig(cfg)
	cfg = rest.AddUserAgent(cfg, "leader-election")
	cfg.Timeout = renewDeadline / 2
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if pod == "" {
		pod, _ = os.Hostname()
	}
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, leaderElectionID,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: pod + "_" + hex.EncodeToString(suffix)})
	if err != nil {
		return nil, err
	}
	return &leaderClock{Interface: lock, deadline: renewDeadline}, nil
}

// Create takes the Lease (resourcelock.Interface), recording the time when it succeeds.
func (l *leaderClock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Create(ctx, ler)
	l.record(start, ler, err)
	return err
}

// Update renews or releases the Lease (resourcelock.Interface), recording the time when it
// succeeds.
func (l *leaderClock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Update(ctx, ler)
	l.record(start, ler, err)
	return err
}

func (l *leaderClock) record(start time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	if err != nil {
		return // not renewed: the last renewal ages towards the deadline
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holding = ler.HolderIdentity == l.Identity()
	if l.holding {
		l.renewed = start
	}
}

// Get reads the Lease (resourcelock.Interface), recording its holder and when its record last
// changed, as client-go's elector observes it.
func (l *leaderClock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ler, raw, err := l.Interface.Get(ctx)
	if err == nil && ler != nil {
		l.mu.Lock()
		if ler.HolderIdentity != l.holder.HolderIdentity || !ler.RenewTime.Equal(&l.holder.RenewTime) {
			l.holder, l.seen = *ler, time.Now()
		}
		l.mu.Unlock()
	}
	return ler, raw, err
}

// Holder returns the identity of the leader as this process last read the Lease, when its
// holder renewed it (the record changed) less than its lease duration ago by this process's
// clock; ok is false otherwise (no holder, or one that stopped renewing: a takeover is under way).
func (l *leaderClock) Holder() (identity string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lease := time.Duration(l.holder.LeaseDurationSeconds) * time.Second
	if l.holder.HolderIdentity == "" || time.Since(l.seen) >= lease {
		return "", false
	}
	return l.holder.HolderIdentity, true
}

// Leading reports whether this process renewed its leadership less than the renew deadline ago
// (and has not released it since).
func (l *leaderClock) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holding && time.Since(l.renewed) < l.deadline
}
