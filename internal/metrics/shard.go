package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ShardStatus is this replica's share of the resources when the manager shards them
// (internal/shard.Coordinator.Status, and the resources counted in its buckets).
type ShardStatus struct {
	Members   int // live members, this replica included
	Buckets   int // buckets in all
	Held      int // buckets this replica holds
	Releasing int // of which being handed over
	InFlight  int // resource reconciles admitted in its buckets and not done
	Resources int // InfraResources whose bucket this replica holds
}

var (
	shardMembersDesc = prometheus.NewDesc("conductor_tf_shard_members",
		"Live replicas sharing the resources, as this replica sees them (its membership Leases).", nil, nil)
	shardBucketsDesc = prometheus.NewDesc("conductor_tf_shard_buckets",
		"Buckets of resources, by state: held (by this replica, handing over included), releasing (being handed over once its reconciles end), total (in all).", []string{"state"}, nil)
	shardInFlightDesc = prometheus.NewDesc("conductor_tf_shard_reconciles_in_flight",
		"Resource reconciles under way in this replica's buckets (a bucket is handed over once its own are done).", nil, nil)
	shardResourcesDesc = prometheus.NewDesc("conductor_tf_shard_resources",
		"InfraResources whose bucket this replica holds: its share.", nil, nil)
)

// shardCollector reads a replica's share at scrape time, from the function RegisterShard set
// (zeros until then: a manager that does not shard reports no share).
type shardCollector struct {
	status atomic.Pointer[func() ShardStatus]
}

var shards = &shardCollector{}

func (c *shardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{shardMembersDesc, shardBucketsDesc, shardInFlightDesc, shardResourcesDesc} {
		ch <- d
	}
}

func (c *shardCollector) Collect(ch chan<- prometheus.Metric) {
	var s ShardStatus
	if f := c.status.Load(); f != nil {
		s = (*f)()
	}
	ch <- prometheus.MustNewConstMetric(shardMembersDesc, prometheus.GaugeValue, float64(s.Members))
	ch <- prometheus.MustNewConstMetric(shardBucketsDesc, prometheus.GaugeValue, float64(s.Held), "held")
	ch <- prometheus.MustNewConstMetric(shardBucketsDesc, prometheus.GaugeValue, float64(s.Releasing), "releasing")
	ch <- prometheus.MustNewConstMetric(shardBucketsDesc, prometheus.GaugeValue, float64(s.Buckets), "total")
	ch <- prometheus.MustNewConstMetric(shardInFlightDesc, prometheus.GaugeValue, float64(s.InFlight))
	ch <- prometheus.MustNewConstMetric(shardResourcesDesc, prometheus.GaugeValue, float64(s.Resources))
}

// RegisterShard makes the shard series (conductor_tf_shard_*, registered by Register, zero until
// then) read status at every scrape: call it when the manager shards resources.
func RegisterShard(status func() ShardStatus) {
	shards.status.Store(&status)
}
