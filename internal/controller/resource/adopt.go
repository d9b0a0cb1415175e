package resource

// Runs on runner pools that a predecessor started: when the leader dies mid-run, the runner resumes
// the run on the next leader, which adopts it (Adopter.Vouch vouches for it and issues it new state
// credentials; runners.Dispatcher swaps them in), tells the controller through Runs.Resumed, and
// whose reconcile attaches to it (attachRun, Runs.Attach) instead of killing it and planning its
// creates again.
//
// The vouching (Adopter) is no part of the Reconciler: it needs the API server, the state server
// and the recorder only, so the manager builds it before the run protocol starts, and the run
// protocol and the reconciler need nothing of each other.

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// adoptable reports a last run that a predecessor's runner may still carry and that this manager
// adopts: an apply or plan recorded Running.
func adoptable(last *v1alpha1.RunStatus) bool {
	return last != nil && last.Result == v1alpha1.RunRunning && (last.Operation == "apply" || last.Operation == "plan")
}

// orUnknown is s, or "an unknown manager" when empty.
func orUnknown(s string) string {
	if s == "" {
		return "an unknown manager"
	}
	return s
}

// attachRun carries on the run a predecessor started on a runner pool, which a runner resumed here
// and this manager adopted (Adopter.Vouch): its events and outcome are recorded as those of a run this
// reconcile started (ranApply), and no other run starts. A resource whose last run is such a run,
// not adopted here (yet), waits until RunnerFence has passed since this manager began to lead: its
// runner may still resume it, and Runs.Resumed wakes the resource when it does; after that the run
// is dead (its runner killed it) and the next reconcile's recoverOwnLock releases its lock.
func (r *syncer) attachRun(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	res := s.res
	last := res.Status.LastRun
	if res.Spec.RunnerPool == "" || !adoptable(last) {
		return ctrl.Result{}, nil
	}
	if last.StartTime != nil {
		s.runStart = last.StartTime.Time
	}
	out, attached, err := r.runs.Attach(ctx, res.Name, last.ID, tfrunner.ApplyOptions{Events: runEvents(ctx, s)})
	if attached {
		// The outcome is that of the generation the run was started for: a spec changed since
		// is not marked applied (ObservedGeneration, conditions, the run record), and runs next.
		gen := res.Generation
		res.Generation = last.Generation
		result, rerr := r.ranApply(ctx, s, out, err)
		res.Generation = gen
		if last.Generation != gen && rerr == nil {
			result = ctrl.Result{RequeueAfter: time.Second} // the new generation runs next
		}
		return result, rerr
	}
	s.runStart = time.Time{}
	if k := r.keeper; !k.Live(last.ID) && k.RunnerFenced(s.res.Name) {
		wait := r.fence.RunnerWait(s.res.Name)
		ctrl.LoggerFrom(ctx).Info("the last run, started by the previous leader on a runner pool, may still be resumed here: no run starts until then",
			"run", last.ID, "wait", wait.Round(time.Second).String())
		return s.end(ctrl.Result{RequeueAfter: wait}), nil
	}
	return ctrl.Result{}, nil
}
