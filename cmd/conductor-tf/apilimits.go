package main

import "k8s.io/client-go/rest"

// The manager's client-side rate limit (--kube-api-qps, --kube-api-burst). By default there is none:
// a negative QPS, as controller-runtime's GetConfig returns (since v0.16), for which client-go builds
// no token bucket, and the API server's API Priority and Fairness bounds the manager's requests
// instead. A limit of 20 requests per second (client-go's old default) held a new leader's first
// reconciles of a hundred resources in line for seconds each ("client-side throttling, not
// priority and fairness" in its log), past the lease of a run a runner kept for it to adopt.
const (
	defaultKubeAPIQPS   = -1
	defaultKubeAPIBurst = 30
)

// kubeAPIQPSUsage documents --kube-api-qps.
const kubeAPIQPSUsage = "Requests per second the manager's client may send to the API server, sustained (client-go's token bucket); " +
	"0 or less (the default): no client-side limit, as controller-runtime's default, the API server's API Priority and Fairness bounding them. " +
	"Set it where the API server's flow control is not to be relied on: docs/runner-pools.md#the-arithmetic-for-10000-and-100000-resources."

// withClientLimits sets the rate limit of the clients built from cfg: qps requests per second
// sustained and burst above it (client-go's token bucket); qps ≤ 0 turns the limit off (a
// negative QPS: client-go builds no token bucket; 0 would be client-go's own default of 5 per
// second). It returns cfg.
func withClientLimits(cfg *rest.Config, qps float64, burst int) *rest.Config {
	if qps <= 0 {
		qps = -1
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	return cfg
}
