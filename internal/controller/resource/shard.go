package resource

import (
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Shard is this replica's share of the resources when the manager's replicas divide them
// (internal/shard.Coordinator): keys are ShardKey(resource name).
type Shard interface {
	// Enter admits one reconcile of the resource whose key this is, when its bucket is held here
	// and not being handed over; done must be called when the reconcile ends. handover is closed
	// when the bucket begins to be handed over meanwhile; lost when this replica stopped holding
	// it without handing it over (its runs are being killed): the reconcile writes nothing more.
	Enter(key string) (done func(), handover, lost <-chan struct{}, ok bool)
	// Since is when this replica took the key's bucket (the zero time when it does not hold it).
	Since(key string) time.Time
	// Bucket is the key's bucket.
	Bucket(key string) int
}

// ShardKey is the key a resource is sharded by: its name as the LabelResource label of its runs
// and state says it (v1alpha1.LabelValue), so that the state server finds a run's bucket from
// the run's labels alone.
func ShardKey(name string) string { return v1alpha1.LabelValue(name) }

// enterShard admits the reconcile of resource name on this replica: always without sharding;
// with it, only while the resource's bucket is held here (Shard.Enter). done ends the admission;
// handover and lost (nil without sharding) are closed when the bucket begins to be handed over,
// and when it was lost without a handover.
func (r *Reconciler) enterShard(name string) (done func(), handover, lost <-chan struct{}, ok bool) {
	if r.opts.Shard == nil {
		return func() {}, nil, nil, true
	}
	return r.opts.Shard.Enter(ShardKey(name))
}

// errBucketLost ends a reconcile whose resource's bucket this replica lost without handing it
// over (its membership lapsed, or another replica took the bucket): its runs were killed, and it
// writes nothing more, since the bucket's new owner may write already. It wraps context.Canceled.
var errBucketLost = fmt.Errorf("this controller replica lost the resource's share to another and writes nothing more of it: %w", context.Canceled)

// untilLost returns ctx cancelled with errBucketLost once lost is closed (nil: never), and the
// func that releases it.
func untilLost(ctx context.Context, lost <-chan struct{}) (context.Context, func()) {
	if lost == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-lost:
			cancel(errBucketLost)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// bucketLost reports whether s's bucket was lost (errBucketLost) since the reconcile was admitted.
func (s *resourceScope) bucketLost() bool {
	if s.lost == nil {
		return false
	}
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// errHandedOver ends a run that had not started when this replica began handing its resource's
// bucket over: it gives its place in line up, and the bucket's next owner runs it. It wraps
// context.Canceled (the run is recorded as Cancelled and started again by the new owner).
var errHandedOver = fmt.Errorf("this controller replica is handing the resource's share over to another and starts no run of it; the other runs it: %w", context.Canceled)

// Run starts under a handover (resourceScope.untilHandover): waiting for a slot, started, or
// given up because the bucket is being handed over.
const (
	runWaiting int32 = iota
	runStarted
	runHandedOver
)

// untilHandover returns ctx cancelled when the resource's bucket begins to be handed over before
// the run starts (the Started event calls startRun): a run waiting for a slot then gives its place
// up rather than hold the handover back for as long as the runs ahead of it take. A run that
// started is never cancelled by it. stop releases what it holds. Without sharding, ctx itself.
func (s *resourceScope) untilHandover(ctx context.Context) (context.Context, func()) {
	if s.handover == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-s.handover:
			if s.runState.CompareAndSwap(runWaiting, runHandedOver) {
				cancel(errHandedOver)
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// startRun is told the run got its slot (the Started event): errHandedOver when the handover
// came first, and the run must start no command.
func (s *resourceScope) startRun() error {
	if s.runState.CompareAndSwap(runWaiting, runStarted) || s.runState.Load() == runStarted {
		return nil
	}
	return errHandedOver
}

// handedOver turns err into errHandedOver when the run was given up for a handover (its error is
// then the slot wait's context.Canceled).
func (s *resourceScope) handedOver(err error) error {
	if err != nil && s.runState.Load() == runHandedOver {
		return errHandedOver
	}
	return err
}

// BucketsTaken wakes the resources of buckets this replica has just taken (Shard's OnAcquired):
// their reconciles were skipped here until now, and their drift checks are scheduled by no one. It
// lists the resources from the cache and queues those of the buckets, from a goroutine of its own
// (the queue may not be started yet).
func (r *Reconciler) BucketsTaken(buckets []int) {
	if r.opts.Shard == nil {
		return
	}
	go func() {
		list := &v1alpha1.InfraResourceList{}
		if err := r.List(context.Background(), list); err != nil {
			return // the cache is not started: its first sync queues every resource anyway
		}
		for i := range list.Items {
			res := &list.Items[i]
			if slices.Contains(buckets, r.opts.Shard.Bucket(ShardKey(res.Name))) {
				r.shardEvents <- event.GenericEvent{Object: res}
			}
		}
	}()
}
