package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The shard series are zero on a manager that does not shard, and its share once RegisterShard
// gave the source.
func TestShardCollector(t *testing.T) {
	c := &shardCollector{}
	zero := `
# HELP conductor_tf_shard_members Live replicas sharing the resources, as this replica sees them (its membership Leases).
# TYPE conductor_tf_shard_members gauge
conductor_tf_shard_members 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(zero), "conductor_tf_shard_members"); err != nil {
		t.Error(err)
	}
	status := func() ShardStatus {
		return ShardStatus{Members: 3, Buckets: 256, Held: 90, Releasing: 2, InFlight: 5, Resources: 3400}
	}
	c.status.Store(&status)
	want := `
# HELP conductor_tf_shard_buckets Buckets of resources, by state: held (by this replica, handing over included), releasing (being handed over once its reconciles end), total (in all).
# TYPE conductor_tf_shard_buckets gauge
conductor_tf_shard_buckets{state="held"} 90
conductor_tf_shard_buckets{state="releasing"} 2
conductor_tf_shard_buckets{state="total"} 256
# HELP conductor_tf_shard_resources InfraResources whose bucket this replica holds: its share.
# TYPE conductor_tf_shard_resources gauge
conductor_tf_shard_resources 3400
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "conductor_tf_shard_buckets", "conductor_tf_shard_resources"); err != nil {
		t.Error(err)
	}
}
