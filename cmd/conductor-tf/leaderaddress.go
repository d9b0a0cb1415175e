package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// leaderAddress is runners.DispatcherOptions.Leader for a replica that does not lead: the run
// protocol address of the one that does, so that runners connect there rather than wherever the
// Service sends them (internal/runners/leader.go). The leader is the holder of the leader Lease as
// this replica's elector last read it (leaderClock.Holder): its identity is <pod>_<random>
// (newLeaderClock), and the address is that pod's IP at the run protocol's port.
type leaderAddress struct {
	clock *leaderClock
	pods  corev1client.PodInterface
	// pod is this replica's own pod; port the run protocol's.
	pod, port string

	mu       sync.Mutex
	identity string    // the holder the cached address is of
	addr     string    // "": its lookup failed, at failedAt
	failedAt time.Time // a failed lookup is not tried again for leaderLookupRetry
}

// leaderLookupRetry is how long a failed lookup of the holder's pod is not tried again: runners
// are refused once a second each, and a slow API server must not get a pods get per refusal.
const leaderLookupRetry = 5 * time.Second

// Leader returns the leader's run protocol address (host:port), or "" when no holder renews the
// Lease, the holder is this process or a predecessor in this pod (a restarted container: it is
// dead), or the holder's pod cannot be read within a second or has no IP yet. An address is looked
// up once per holder identity; a failed lookup again after leaderLookupRetry.
func (a *leaderAddress) Leader() string {
	id, ok := a.clock.Holder()
	if !ok || id == a.clock.Identity() {
		return ""
	}
	i := strings.LastIndexByte(id, '_')
	if i <= 0 || id[:i] == a.pod {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.identity == id && (a.addr != "" || time.Since(a.failedAt) < leaderLookupRetry) {
		return a.addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	a.identity, a.addr = id, ""
	p, err := a.pods.Get(ctx, id[:i], metav1.GetOptions{})
	if err != nil || p.Status.PodIP == "" {
		a.failedAt = time.Now()
		return ""
	}
	a.addr = net.JoinHostPort(p.Status.PodIP, a.port)
	return a.addr
}
