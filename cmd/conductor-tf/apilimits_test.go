package main

import (
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The manager's clients are not rate-limited on the client side unless --kube-api-qps says so: a
// default of 20 per second held a new leader's first reconciles in line (withClientLimits).
func TestClientRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		qps     float64
		limited bool
	}{
		{"the default", defaultKubeAPIQPS, false},
		{"0, which client-go would read as 5 per second", 0, false},
		{"a limit set", 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := withClientLimits(&rest.Config{Host: "https://127.0.0.1:1"}, tc.qps, defaultKubeAPIBurst)
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			limiter := cs.CoreV1().RESTClient().GetRateLimiter()
			if got := limiter != nil; got != tc.limited {
				t.Fatalf("--kube-api-qps=%v: client rate limiter %v, want limited=%v", tc.qps, limiter, tc.limited)
			}
			if tc.limited && limiter.QPS() != float32(tc.qps) {
				t.Fatalf("--kube-api-qps=%v: the limiter allows %v per second", tc.qps, limiter.QPS())
			}
		})
	}
}
