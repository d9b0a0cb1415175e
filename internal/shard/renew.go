package shard

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationLeaving marks the member Lease of a replica that is stopping gracefully: the others
// count it out of the owners at once, so that each bucket it hands back is taken by its next owner
// as soon as it is released, not only once its last reconcile ended and its Lease was deleted.
const AnnotationLeaving = "conductor.io/shard-leaving"

// startRenewal renews the member Lease once, then every RetryPeriod on a goroutine of its own
// (renewLoop), and watches its deadline on another (watch). stop ends both; renewing is closed once
// the renewal's goroutine ended (no write of the member Lease follows).
func (c *Coordinator) startRenewal(ctx context.Context, log logr.Logger) (stop func(), renewing <-chan struct{}) {
	ctx, stop = context.WithCancel(ctx)
	if err := c.renew(ctx, time.Now()); err != nil {
		log.Info("member Lease not renewed; retrying", "error", err.Error())
	}
	done := make(chan struct{})
	go func() { defer close(done); c.renewLoop(ctx, log) }()
	go c.watch(ctx, log)
	return stop, done
}

// renewLoop renews the member Lease every RetryPeriod until ctx ends. It never waits behind the
// bucket writes of a period (up to one per bucket): a slow period must not lapse the membership.
func (c *Coordinator) renewLoop(ctx context.Context, log logr.Logger) {
	t := time.NewTicker(c.o.RetryPeriod)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if err := c.renew(ctx, time.Now()); err != nil && ctx.Err() == nil {
			log.Info("member Lease not renewed; retrying", "error", err.Error())
		}
	}
}

// watch lapses the membership (lapseNow) the moment RenewDeadline has passed since the start of the
// last successful renewal, by a timer: a renewal that hangs, or one that never returns an error,
// lapses it as surely as one that fails. It ends with ctx or at the lapse.
func (c *Coordinator) watch(ctx context.Context, log logr.Logger) {
	t := time.NewTimer(c.o.RetryPeriod)
	defer t.Stop()
	for {
		c.mu.Lock()
		renewed := c.renewed
		c.mu.Unlock()
		wait := c.o.RetryPeriod // not renewed yet: nothing is served, nothing can lapse
		if !renewed.IsZero() {
			if wait = time.Until(renewed.Add(c.o.RenewDeadline)); wait <= 0 {
				c.lapseNow(log)
				return
			}
		}
		t.Reset(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// lapseNow ends this replica's membership: every bucket is dropped (Enter and Serves refuse them
// from now on), OnLost is told of them all so that their runs are killed, their admitted
// reconciles' lost channels close, and Start returns ErrMembershipLost. By then the others may take
// the buckets in LeaseDuration − RenewDeadline.
func (c *Coordinator) lapseNow(log logr.Logger) {
	c.mu.Lock()
	if c.lapsed {
		c.mu.Unlock()
		return
	}
	c.lapsed = true
	dropped := map[int]*held{}
	for b := range c.owned {
		dropped[b] = c.dropLocked(b)
	}
	c.mu.Unlock()
	log.Error(ErrMembershipLost, "shard membership lapsed: every bucket dropped and its runs killed", "buckets", len(dropped),
		"renewDeadline", c.o.RenewDeadline.String())
	c.lose(dropped, true)
	close(c.lapse)
}

// renew writes now as the member Lease's renewTime (creating the Lease when missing), marked
// leaving while the replica stops, and records the renewal's start on success. Used by the
// renewal's goroutine only (c.self).
func (c *Coordinator) renew(ctx context.Context, now time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.RenewDeadline/2)
	defer cancel()
	api := c.o.Kube.CoordinationV1().Leases(c.o.Namespace)
	if c.self == nil {
		l, err := api.Get(ctx, MemberLeaseName(c.o.Pod), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName(c.o.Pod), Namespace: c.o.Namespace,
				Labels: map[string]string{LabelShard: roleMember}}}
		case err != nil:
			return err
		}
		c.self = l
	}
	l := c.self.DeepCopy()
	seconds := int32(c.o.LeaseDuration / time.Second)
	t := metav1.NewMicroTime(now)
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != c.o.Identity {
		l.Spec.AcquireTime = &t
		delete(l.Annotations, AnnotationLeaving) // a Lease an earlier process of this pod left
	}
	c.mu.Lock()
	stopping := c.stopping
	c.mu.Unlock()
	if stopping {
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[AnnotationLeaving] = "true"
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &c.o.Identity, &seconds, &t
	var err error
	if l.ResourceVersion == "" {
		l, err = api.Create(ctx, l, metav1.CreateOptions{})
	} else {
		l, err = api.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		c.self = nil // read again next period (a conflict: someone else wrote it)
		return err
	}
	c.self = l
	c.mu.Lock()
	if now.After(c.renewed) {
		c.renewed = now
	}
	c.mu.Unlock()
	return nil
}
