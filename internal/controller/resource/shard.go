package resource

import (
	"context"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// Shard is this replica's share of the resources when the manager's replicas divide them
// (internal/shard.Coordinator): keys are ShardKey(resource name).
type Shard interface {
	// Enter admits one reconcile of the resource whose key this is, when its bucket is held here
	// and not being handed over; done must be called when the reconcile ends.
	Enter(key string) (done func(), ok bool)
	// Since is when this replica took the key's bucket (the zero time when it does not hold it).
	Since(key string) time.Time
	// Bucket is the key's bucket.
	Bucket(key string) int
}

// ShardKey is the key a resource is sharded by: its name as the LabelResource label of its runs
// and state says it (statebackend.LabelValue), so that the state server finds a run's bucket from
// the run's labels alone.
func ShardKey(name string) string { return statebackend.LabelValue(name) }

// enterShard admits the reconcile of resource name on this replica: always without sharding;
// with it, only while the resource's bucket is held here (Shard.Enter). done ends the admission.
func (r *Reconciler) enterShard(name string) (done func(), ok bool) {
	if r.Shard == nil {
		return func() {}, true
	}
	return r.Shard.Enter(ShardKey(name))
}

// BucketsTaken wakes the resources of buckets this replica has just taken (Shard's OnAcquired):
// their reconciles were skipped here until now, and their drift checks are scheduled by no one. It
// lists the resources from the cache and queues those of the buckets, from a goroutine of its own
// (the queue may not be started yet).
func (r *Reconciler) BucketsTaken(buckets []int) {
	if r.Shard == nil || r.shardEvents == nil {
		return
	}
	go func() {
		list := &v1alpha1.InfraResourceList{}
		if err := r.List(context.Background(), list); err != nil {
			return // the cache is not started: its first sync queues every resource anyway
		}
		for i := range list.Items {
			res := &list.Items[i]
			if slices.Contains(buckets, r.Shard.Bucket(ShardKey(res.Name))) {
				r.shardEvents <- event.GenericEvent{Object: res}
			}
		}
	}()
}
