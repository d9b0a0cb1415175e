package shard

import (
	"context"
	"slices"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// period is one RetryPeriod's work: see who is live, then take, keep or hand back each bucket
// (the member Lease is renewed on a goroutine of its own, renewLoop). API errors are logged and
// retried next period; a lapse of the membership ends it early.
func (c *Coordinator) period(ctx context.Context, log logr.Logger) {
	now := time.Now()
	all, err := c.leases.List(labels.Everything())
	if err != nil {
		return // the lister reads memory: not expected
	}
	members, buckets := c.observe(all, now)
	c.collectDead(ctx, all, buckets, now)
	c.mu.Lock()
	c.members = len(members)
	stopping, live := c.stopping, c.liveLocked(time.Now())
	c.mu.Unlock()
	if !live || stopping {
		members = slices.DeleteFunc(members, func(m string) bool { return m == c.o.Identity })
	}
	var acquired []int
	for b := range c.o.Buckets {
		if c.Lapsed() {
			return
		}
		desired := owner(members, b)
		if held, resumed := c.keep(ctx, log, b, buckets[BucketLeaseName(b)], desired); held {
			if resumed {
				acquired = append(acquired, b) // what Enter refused while it was handed over is reconciled here after all
			}
			continue
		}
		if desired == c.o.Identity && c.take(ctx, log, b, buckets[BucketLeaseName(b)], now) {
			acquired = append(acquired, b)
		}
	}
	if len(acquired) > 0 {
		log.Info("buckets taken or kept after all", "count", len(acquired), "members", len(members))
		if c.o.OnAcquired != nil {
			c.o.OnAcquired(acquired)
		}
	}
}

// observe returns the live members (identities, sorted) and the bucket Leases by name, from the
// Leases listed, and records each member's sign of life: a member is live while its renewTime was
// last seen to change less than LeaseDuration ago; one whose Lease is marked leaving
// (AnnotationLeaving) is alive (what it holds stays its own until it hands it back) but owns
// nothing more. This replica counts as live when its own
// renewal is (liveLocked), whatever the lister shows yet.
func (c *Coordinator) observe(all []*coordinationv1.Lease, now time.Time) (members []string, buckets map[string]*coordinationv1.Lease) {
	buckets = map[string]*coordinationv1.Lease{}
	present := map[string]bool{}
	for _, l := range all {
		switch l.Labels[LabelShard] {
		case roleBucket:
			buckets[l.Name] = l
			if h := holder(l); h != "" {
				if _, ok := c.seen[h]; !ok {
					c.seen[h] = sighting{at: now} // a holder first noticed now: dead only after LeaseDuration
				}
				present[h] = true
			}
		case roleMember:
			id := holder(l)
			if id == "" {
				continue
			}
			renew := ""
			if l.Spec.RenewTime != nil {
				renew = l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
			}
			if s, ok := c.seen[id]; !ok || s.renew != renew {
				c.seen[id] = sighting{renew: renew, at: now}
			}
			present[id] = true
			if id != c.o.Identity && now.Sub(c.seen[id].at) < c.o.LeaseDuration && l.Annotations[AnnotationLeaving] == "" {
				members = append(members, id)
			}
		}
	}
	for id := range c.seen {
		if !present[id] {
			delete(c.seen, id)
		}
	}
	c.mu.Lock()
	if c.liveLocked(now) {
		members = append(members, c.o.Identity)
	}
	c.mu.Unlock()
	slices.Sort(members)
	return members, buckets
}

// collectDead deletes the member Leases of replicas dead for 4 × LeaseDuration that hold no bucket
// (a pod killed without its graceful stop leaves its Lease behind); the delete is conditioned on
// the Lease's resourceVersion, so a replica that renewed it meanwhile keeps it.
func (c *Coordinator) collectDead(ctx context.Context, all []*coordinationv1.Lease, buckets map[string]*coordinationv1.Lease, now time.Time) {
	holding := map[string]bool{}
	for _, b := range buckets {
		holding[holder(b)] = true
	}
	for _, l := range all {
		id := holder(l)
		if l.Labels[LabelShard] != roleMember || id == c.o.Identity || holding[id] {
			continue
		}
		if s, ok := c.seen[id]; !ok || now.Sub(s.at) < 4*c.o.LeaseDuration {
			continue
		}
		rv := l.ResourceVersion
		dctx, cancel := context.WithTimeout(ctx, c.o.RenewDeadline/2)
		_ = c.o.Kube.CoordinationV1().Leases(c.o.Namespace).Delete(dctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		cancel()
	}
}

func holder(l *coordinationv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// dead reports whether identity id has shown no sign of life for LeaseDuration (this process's
// clock): by then its own process has stopped serving what it held (RenewDeadline < LeaseDuration).
func (c *Coordinator) dead(id string, now time.Time) bool {
	s, ok := c.seen[id]
	return ok && now.Sub(s.at) >= c.o.LeaseDuration
}

func transitions(l *coordinationv1.Lease) int32 {
	if l == nil || l.Spec.LeaseTransitions == nil {
		return 0
	}
	return *l.Spec.LeaseTransitions
}
