package state

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// State locks: a dead run's own lock recovered, a lock that stops a run shown, the fences that
// leave an earlier manager's runs alone.

// RecoverOwnLock releases a state lock that a dead run of this deployment left behind, before the
// next run: the resource's last run was recorded (before it started) by this deployment, it is no
// longer alive in this controller's pool, and the lock names this deployment as holder and was
// taken while that run went on (statebackend.IsOwnStaleLock). The run may have died with its pod
// (recorded Running) or alone (killed, recorded Failed). Anyone else's lock, and a live run's, is
// left alone: the run then fails with StateLocked and status shows the holder. A lock of a run a
// predecessor manager started is recovered only once that run can no longer write: until then it
// returns a *LockFenced, and no run may start. h is the resource's state handle. beforeRelease
// (nil: none) is called once the lock is found to be a dead run's and before it is released; its
// error stops the recovery (the lock stays, the witness that the run held it).
func (r *Keeper) RecoverOwnLock(ctx context.Context, res *v1alpha1.InfraResource, h *statebackend.Handle, beforeRelease func() error) error {
	last := res.Status.LastRun
	if last == nil || last.StartTime == nil || endedOnItsOwn(last) {
		return nil
	}
	lock, err := h.InspectLock(ctx)
	if err != nil || lock == nil {
		return err
	}
	run := &statebackend.RunRecord{Who: last.Who, Started: last.StartTime.Time, Alive: r.Live(last.ID)}
	if last.Result != v1alpha1.RunRunning && last.CompletionTime != nil {
		run.Ended = last.CompletionTime.Time
	}
	dead, fenced := r.backend.mayRecover(h.Suffix(), lock, last, run, r.who)
	if !dead {
		return nil // not a dead run's lock, or its state is not saved yet (PutBack saves it)
	}
	if fenced {
		// The dead run's lock, once its carrier can no longer write: no run starts meanwhile (it
		// would only fail StateLocked, and its record would replace the dead run's, by which
		// alone the lock is recovered).
		if res.Spec.RunnerPool != "" && r.RunnerFenced(res.Name) {
			return &LockFenced{Lock: lock.ID, Wait: r.fence.RunnerWait(res.Name)} // its runner may still carry it
		}
		if res.Spec.RunnerPool == "" && last.Controller != r.controller && r.leaderFenced(res.Name) {
			return &LockFenced{Lock: lock.ID, Wait: r.fence.LeaderWait(res.Name)} // its manager's credentials may not have lapsed yet
		}
	}
	if beforeRelease != nil {
		if err := beforeRelease(); err != nil {
			return err
		}
	}
	if err := h.ReleaseLock(ctx, lock.ID); err != nil {
		return fmt.Errorf("recovering own stale lock %s: %w", lock.ID, err)
	}
	metrics.LockRecovered()
	if res.Status.State != nil {
		setLock(res, nil)
	}
	started := "an earlier controller"
	if last.Controller != "" {
		started = last.Controller
	}
	r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonStateLockRecovered, "RecoverLock",
		"released lock %s (holder %s, since %s) left by %s run %s started by %s, which is no longer running",
		lock.ID, lock.Who, lock.Created.Format(time.RFC3339), last.Operation, last.ID, started)
	return nil
}

// LockFenced is RecoverOwnLock's answer for a dead run's lock that is recovered only once its
// carrier can no longer write (RunnerFenced, leaderFenced): try again after Wait; start no run.
type LockFenced struct {
	// Lock is the lock's ID.
	Lock string
	// Wait is how long the fence still holds.
	Wait time.Duration
}

func (e *LockFenced) Error() string {
	return fmt.Sprintf("lock %s of a run this manager's predecessor started is recovered in %s, once that run can no longer write", e.Lock, e.Wait.Round(time.Second))
}

// endedOnItsOwn reports a last run that cannot have left a lock: it succeeded, or stopped for
// approval or invalid input, so Terraform ended on its own and released what it took. Only a run
// recorded Running (it died with its controller) or Failed (it may have been killed) is looked
// for a lock, which saves a Lease read before most runs.
func endedOnItsOwn(last *v1alpha1.RunStatus) bool {
	switch last.Result {
	case v1alpha1.RunSucceeded, v1alpha1.RunWaitingForApproval, v1alpha1.RunInvalid:
		return true
	}
	return false
}

// isRecordedRunLock reports a lock taken through the state server by the very run recorded in
// status (the server names the run in the lock's Info), when that run was this deployment's and is
// not alive: the lock is that dead run's whatever the clocks say.
func isRecordedRunLock(lock *statebackend.Lock, last *v1alpha1.RunStatus, alive bool, self string) bool {
	runID, ok := statebackend.RunOfLock(lock)
	return ok && !alive && last.ID != "" && runID == last.ID && last.Who == self
}

// LockHeld records in res's status who holds the state lock (through h, its state handle; nil:
// nothing) that refused a run. A failed read records nothing.
func (r *Keeper) LockHeld(ctx context.Context, res *v1alpha1.InfraResource, h *statebackend.Handle) {
	if res.Status.State == nil || h == nil {
		return
	}
	if lock, err := h.InspectLock(ctx); err == nil {
		setLock(res, lock)
		res.Status.State.LockStale = r.isStale(lock, time.Now())
	}
}

// DefaultStaleLockAfter is how long a lock that is not a live run's of this deployment is held
// before status reports it as stale: 1 hour.
const DefaultStaleLockAfter = time.Hour

// isStale reports a lock to show as stale: held for longer than StaleLockAfter, and not by a run of
// this controller that is alive. Only a person releases it (kubectl conductor unlock); the
// controller itself releases only its own dead runs' locks (RecoverOwnLock).
func (r *Keeper) isStale(lock *statebackend.Lock, now time.Time) bool {
	after := r.staleLockAfter
	if after <= 0 {
		after = DefaultStaleLockAfter
	}
	if lock == nil || lock.Created.IsZero() || now.Sub(lock.Created) <= after {
		return false
	}
	runID, ok := statebackend.RunOfLock(lock)
	return !ok || !r.Live(runID)
}

// Live reports whether the run runID is alive in this controller: the state server has not
// revoked its credentials yet (statebackend.Server.Live), whichever pool carries it. Without a
// state server (runs use the kubernetes backend directly) runs are synchronous with the reconcile,
// so no run of a resource is alive while it reconciles.
func (r *Keeper) Live(runID string) bool {
	return r.backend.live(runID)
}

// setLock shows lock (nil: none) in status.state.
func setLock(res *v1alpha1.InfraResource, lock *statebackend.Lock) {
	st := res.Status.State
	st.LockID, st.LockHolder, st.LockedSince, st.LockStale = "", "", nil, false
	if lock == nil {
		return
	}
	st.LockID, st.LockHolder = lock.ID, lock.Who
	if !lock.Created.IsZero() {
		st.LockedSince = &metav1.Time{Time: lock.Created}
	}
}

// Stored reports whether the state of h (a resource's handle; nil: none yet) is stored: the state
// server holds no state of it that a run sent and that waits to be written
// (statebackend.Server.Pending). Without a state server runs write their state themselves (the
// kubernetes backend), so it is.
func (r *Keeper) Stored(h *statebackend.Handle) bool {
	return h == nil || !r.backend.pending(h.Suffix())
}

// RunnerFenced reports whether a run on a runner pool that this manager did not start (its
// predecessor did, and died) may still be carried by its runner: until RunnerFence has passed since
// this manager began serving resource name (it leads, or took its bucket), a runner cut off from the dead manager goes on under
// its lease, then freezes and kills its run; only then may its lock be released. Runs this manager
// started are known to the state server (Live) and not concerned.
func (r *Keeper) RunnerFenced(name string) bool {
	return r.fence.runner > 0 && r.fence.RunnerWait(name) > 0
}

// leaderFenced reports whether an in-process run another manager started may still write through
// that manager's state server: until LeaderFence has passed since this manager began to serve
// resource name (it leads, or took its bucket), by when that server refuses it (statebackend.Server.Leading) even if its process is alive, frozen
// or partitioned.
func (r *Keeper) leaderFenced(name string) bool {
	return r.fence.leader > 0 && r.fence.LeaderWait(name) > 0
}
