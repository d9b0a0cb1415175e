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
		OnAcquired: func(buckets []int) {
			if r := m.adopter.r.Load(); r != nil {
				r.BucketsTaken(buckets)
			}
		},
	})
	metrics.RegisterShard(m.shardStatus)
	m.log.Info("sharding resources", "buckets", o.shardBuckets, "memberLease", o.namespace+"/"+shard.MemberLeaseName(o.podName), "identity", m.leader.Identity())
	return m.mgr.Add(m.shard)
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
