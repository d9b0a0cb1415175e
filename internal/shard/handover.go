package shard

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// keep handles bucket b when this replica holds it, and reports whether it does: a bucket whose
// desired owner is another member (or any bucket while stopping) admits no new reconcile and is
// handed back once those admitted are done; one another replica took (its Lease's transitions past
// this replica's epoch: it judged this one dead) is dropped at once. resumed reports a handover
// called off (the desired owner is this replica again before the bucket was handed back, as when
// a joining replica leaves at once): the reconciles Enter refused meanwhile were dropped, and the
// bucket's resources must be reconciled here again (OnAcquired), or they wait for their next event.
func (c *Coordinator) keep(ctx context.Context, log logr.Logger, b int, lease *coordinationv1.Lease, desired string) (holds, resumed bool) {
	c.mu.Lock()
	h := c.owned[b]
	if h == nil {
		c.mu.Unlock()
		return false, false
	}
	if lease != nil && holder(lease) != c.o.Identity && transitions(lease) > h.epoch {
		c.dropLocked(b)
		c.mu.Unlock()
		log.Error(nil, "bucket taken over by another replica, which found this one's membership lapsed", "bucket", b, "holder", holder(lease))
		c.lose(map[int]*held{b: h}, false)
		return true, false
	}
	if replaced(lease, h.lease) {
		c.dropLocked(b)
		c.mu.Unlock()
		log.Error(nil, "bucket Lease deleted or replaced under this replica: it no longer holds the bucket", "bucket", b)
		c.lose(map[int]*held{b: h}, false)
		return true, false
	}
	if lease == nil { // not in the lister: deleted, or created so lately that the lister lags
		base := h.lease
		c.mu.Unlock()
		if c.gone(ctx, b, base) {
			log.Error(nil, "bucket Lease deleted under this replica: it no longer holds the bucket", "bucket", b)
			return true, false
		}
		c.mu.Lock()
	}
	wasReleasing := h.releasing
	h.setReleasing(c.stopping || desired != c.o.Identity)
	resumed = wasReleasing && !h.releasing
	release, base := h.releasing && h.inflight == 0, h.lease
	c.mu.Unlock()
	if release && c.o.Settle != nil && !c.o.Settle(b) {
		log.Info("bucket kept until what this replica holds for its resources is stored", "bucket", b)
		return true, resumed
	}
	if release {
		c.release(ctx, log, b, base)
	}
	if resumed {
		log.Info("bucket handover called off: its desired owner is this replica again", "bucket", b)
	}
	return true, resumed
}

// replaced reports whether the bucket Lease observed is not the one this replica took or last
// wrote (another UID: it was deleted and created again, by another replica or by hand).
func replaced(observed, own *coordinationv1.Lease) bool {
	return observed != nil && own != nil && observed.UID != own.UID
}

// gone reads bucket b's Lease from the API server when the lister lacks it, and drops the bucket
// (true) when it was deleted or replaced under this replica: a replica must never go on serving a
// bucket whose Lease, its fence, another replica may have created anew. Read errors keep it (false)
// until the next period.
func (c *Coordinator) gone(ctx context.Context, b int, own *coordinationv1.Lease) bool {
	ctx, cancel := context.WithTimeout(ctx, c.o.RenewDeadline/2)
	defer cancel()
	l, err := c.o.Kube.CoordinationV1().Leases(c.o.Namespace).Get(ctx, BucketLeaseName(b), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return false
	}
	if err == nil && !replaced(l, own) {
		return false
	}
	c.mu.Lock()
	h := c.owned[b]
	if h != nil && h.lease == own {
		c.dropLocked(b)
		c.mu.Unlock()
		c.lose(map[int]*held{b: h}, false)
		return true
	}
	c.mu.Unlock()
	return true
}

// release clears bucket b's holder (one more transition), so that its desired owner takes it.
// On a conflict the Lease is read again: still this replica's, it is retried next period with
// what was read; another's, it is dropped.
func (c *Coordinator) release(ctx context.Context, log logr.Logger, b int, base *coordinationv1.Lease) {
	ctx, cancel := context.WithTimeout(ctx, c.o.RenewDeadline/2)
	defer cancel()
	api := c.o.Kube.CoordinationV1().Leases(c.o.Namespace)
	l := base.DeepCopy()
	none, next := "", transitions(base)+1
	l.Spec.HolderIdentity, l.Spec.LeaseTransitions = &none, &next
	_, err := api.Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		fresh, gerr := api.Get(ctx, base.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			fresh = nil // deleted: nothing to hand back
		} else if gerr != nil {
			return
		}
		c.mu.Lock()
		h := c.owned[b]
		if h != nil && holder(fresh) == c.o.Identity {
			h.lease = fresh
			h = nil
		} else if h != nil {
			c.dropLocked(b)
		}
		c.mu.Unlock()
		if h != nil {
			c.lose(map[int]*held{b: h}, false)
		}
		return
	}
	if err != nil {
		log.Info("bucket not handed back; retrying", "bucket", b, "error", err.Error())
		return
	}
	c.mu.Lock()
	delete(c.owned, b)
	c.mu.Unlock()
	log.V(1).Info("bucket handed back", "bucket", b)
}

// take makes this replica bucket b's holder when the bucket has no Lease yet, its holder released
// it, or its holder is dead; the write is conditioned on the Lease's resourceVersion (or its
// absence), so that of two replicas only one takes a bucket. It reports whether it did.
func (c *Coordinator) take(ctx context.Context, log logr.Logger, b int, lease *coordinationv1.Lease, now time.Time) bool {
	c.mu.Lock()
	ok := !c.stopping && c.liveLocked(now)
	c.mu.Unlock()
	if !ok {
		return false
	}
	from := holder(lease)
	if lease != nil && from != "" && from != c.o.Identity && !c.dead(from, now) {
		return false // its holder hands it back once its reconciles are done
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.RenewDeadline/2)
	defer cancel()
	api := c.o.Kube.CoordinationV1().Leases(c.o.Namespace)
	t := metav1.NewMicroTime(now)
	seconds := int32(c.o.LeaseDuration / time.Second)
	var l *coordinationv1.Lease
	if lease == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: BucketLeaseName(b), Namespace: c.o.Namespace,
			Labels: map[string]string{LabelShard: roleBucket}}}
	} else {
		l = lease.DeepCopy()
	}
	next := transitions(lease)
	if lease != nil {
		next++
	}
	l.Spec.HolderIdentity, l.Spec.LeaseTransitions = &c.o.Identity, &next
	l.Spec.AcquireTime, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &t, &t, &seconds
	var err error
	if lease == nil {
		l, err = api.Create(ctx, l, metav1.CreateOptions{})
	} else {
		l, err = api.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			log.Info("bucket not taken; retrying", "bucket", b, "error", err.Error())
		}
		return false
	}
	if from != "" && from != c.o.Identity {
		log.Info("bucket taken from a replica found dead", "bucket", b, "from", from, "epoch", next)
	}
	if c.o.OnTake != nil {
		c.o.OnTake(b)
	}
	c.mu.Lock()
	c.owned[b] = newHeld(time.Now(), next, l)
	c.mu.Unlock()
	return true
}

// leave deletes the member Lease once every bucket is handed back: the others stop counting this
// replica at once instead of after LeaseDuration.
func (c *Coordinator) leave(ctx context.Context, log logr.Logger) {
	ctx, cancel := context.WithTimeout(ctx, c.o.RenewDeadline/2)
	defer cancel()
	err := c.o.Kube.CoordinationV1().Leases(c.o.Namespace).Delete(ctx, MemberLeaseName(c.o.Pod), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Info("member Lease not deleted: the other replicas count this one out after its duration", "error", err.Error())
		return
	}
	log.Info("every bucket handed back; member Lease deleted")
}
