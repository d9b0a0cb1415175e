package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	conductorv1alpha1 "github.com/conductor-tf/conductor-tf/api/v1alpha1"
	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/shard"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
)

// shardFlagUsage documents --shard-buckets.
const shardFlagUsage = "Divide resources among every replica of the Deployment (docs/runner-pools.md#sharding): each replica " +
	"reconciles, runs, drift-checks and serves the state of the resources whose buckets it holds, out of this many (the " +
	"same on every replica; 256 is a good number); claims, classes and ready pools stay with the leader. 0 (the default): " +
	"the leader reconciles every resource. Needs --leader-elect, and no --run-protocol-address (runner pools are served " +
	"by one replica only)."

// newShard starts this replica's membership of the resources' shards when --shard-buckets is set:
// a shard.Coordinator run by the manager on every replica, whose Leases have the leader election's
// timing, and which wakes the resources of the buckets it takes through the resource reconciler
// (once registered). It returns an error for --shard-buckets without --leader-elect or with
// --run-protocol-address.
func (m *manager) newShard() error {
	o := m.o
	if o.shardBuckets <= 0 {
		return nil
	}
	if !o.leaderElect {
		return errors.New("--shard-buckets needs --leader-elect: claims and classes are reconciled by the leader")
	}
	if o.runProtocolAddr != "" {
		return fmt.Errorf("--shard-buckets=%d with --run-protocol-address=%s: runner pools are served by one replica, not by shards; "+
			"pass --run-protocol-address= (runs stay in each replica's own pool) or --shard-buckets=0", o.shardBuckets, o.runProtocolAddr)
	}
	so := shard.Options{LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod}
	if err := so.Validate(); err != nil {
		return err
	}
	cfg := rest.CopyConfig(m.cfg)
	cfg = rest.AddUserAgent(cfg, "shard-membership")
	cfg.Timeout = renewDeadline / 2
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	m.shard = shard.New(shard.Options{
		Kube: kube, Namespace: o.namespace, Pod: o.podName, Identity: m.leader.Identity(), Buckets: o.shardBuckets,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		// The Coordinator runs from the manager's Start, after setupReconcilers set m.resources.
		OnAcquired: func(buckets []int) { m.resources.BucketsTaken(buckets) },
		OnLost:     m.shardLost,
		OnTake: func(int) {
			if m.stateServer != nil {
				m.stateServer.RelistPending()
			}
		},
		Settle: m.settleBucket,
	})
	metrics.RegisterShard(m.shardStatus)
	m.log.Info("sharding resources", "buckets", o.shardBuckets, "memberLease", o.namespace+"/"+shard.MemberLeaseName(o.podName), "identity", m.leader.Identity())
	return m.mgr.Add(m.shard)
}

// shardLost kills the runs of the buckets this replica lost without handing them back
// (shard.Options.OnLost): SIGKILL at once, as on lost leadership, since another replica may run
// them soon. With the membership lapsed that is every run of the process, and the drain is
// interrupted (every reconcile's context cancelled, no run starts); Start then returns
// ErrMembershipLost and the process ends (stop). Otherwise only the runs whose workspace key (the
// resource's name) hashes to a lost bucket. The state server already refuses their requests
// (Serves).
func (m *manager) shardLost(buckets []int, membership bool) {
	if m.runsDir == "" {
		return // no run started yet
	}
	if membership {
		killed := procs.Reap(m.runsDir, true)
		m.drainer.Interrupt()
		m.log.Error(shard.ErrMembershipLost, "every run killed", "processes", killed, "buckets", len(buckets))
		return
	}
	lost := map[int]bool{}
	for _, b := range buckets {
		lost[b] = true
	}
	killed := procs.ReapKeys(m.runsDir, func(key string) bool { return lost[m.shard.Bucket(resourcecontroller.ShardKey(key))] })
	if m.stateServer != nil {
		m.stateServer.ForgetPending(func(labels map[string]string) bool { return lost[m.shard.Bucket(labels[statebackend.LabelResource])] })
	}
	m.log.Error(nil, "buckets lost without a handover: their runs killed", "buckets", buckets, "processes", killed)
}

// settleBucket writes the pending states this replica's state server keeps for the resources of
// bucket b (shard.Options.Settle), and reports whether none is left: a bucket is handed back only
// with nothing of its states held here, since the next owner would otherwise run on an older
// stored state. Each write is bounded by 5 s; what fails is tried again next period.
func (m *manager) settleBucket(b int) bool {
	if m.stateServer == nil {
		return true
	}
	inBucket := func(labels map[string]string) bool { return m.shard.Bucket(labels[statebackend.LabelResource]) == b }
	settled, err := m.stateServer.StorePendingWhere(inBucket, 5*time.Second)
	if !settled {
		m.log.Info("a pending state of a bucket being handed back is not stored yet; the bucket is kept", "bucket", b, "error", err.Error())
	}
	return settled
}

// shardStatus is this replica's share for the metrics: the Coordinator's view, and the resources
// of the cache whose bucket it holds.
func (m *manager) shardStatus() metrics.ShardStatus {
	s := m.shard.Status()
	out := metrics.ShardStatus{Members: s.Members, Buckets: s.Buckets, Held: s.Held, Releasing: s.Releasing, InFlight: s.InFlight}
	held := map[int]bool{}
	for _, b := range m.shard.Held() {
		held[b] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list conductorv1alpha1.InfraResourceList
	if err := m.mgr.GetCache().List(ctx, &list); err == nil {
		for i := range list.Items {
			if held[m.shard.Bucket(resourcecontroller.ShardKey(list.Items[i].Name))] {
				out.Resources++
			}
		}
	}
	return out
}

// servesRun says whether this replica may serve a run of the state server now: it holds the bucket
// of the run's resource (shard.Coordinator.Serves, by the run's LabelResource).
func (m *manager) servesRun(labels map[string]string) bool {
	return m.shard.Serves(labels[statebackend.LabelResource])
}

// lostMembership reports whether the manager stopped because this replica's shard membership lapsed.
func lostMembership(err error) bool { return errors.Is(err, shard.ErrMembershipLost) }
