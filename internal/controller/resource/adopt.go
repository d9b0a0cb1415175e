package resource

// Runs on runner pools that a predecessor started: when the leader dies mid-run, the runner resumes
// the run on the next leader, which adopts it (AdoptRun vouches for it and issues it new state
// credentials; runners.Dispatcher swaps them in) and whose reconcile attaches to it (attachRun)
// instead of killing it and planning its creates again.

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Attacher is implemented by Runs that can carry on a run another manager started
// (runners.Router): Attach waits for the adopted apply runID of key and returns its outcome as
// Apply does; attached is false when no such run waits here.
type Attacher interface {
	Attach(ctx context.Context, key, runID string, opts tfrunner.ApplyOptions) (out *tfrunner.ApplyResult, attached bool, err error)
}

// AdoptRun is runners.DispatcherOptions.Adopt: it vouches for a run a runner resumed to this
// manager, which did not start it, only when the resource r.Key's status (read from the API
// server, not the cache) records it as its last run, still Running, an apply or plan, on the runner
// pool r.Pool, and the resource is not being deleted. It then issues the run new state credentials
// that take over the lock the run holds (statebackend.Server.IssueAdoptedRun) and records a
// RunAdopted event. Any other run is refused with an error saying why (the runner kills it).
func (r *Reconciler) AdoptRun(ctx context.Context, req runners.AdoptRequest) (*runners.Adoption, error) {
	if r.opts.StateServer == nil || r.opts.Runs == nil {
		return nil, errors.New("this manager serves no state to runs")
	}
	if req.Op != runnerpb.Operation_OPERATION_APPLY {
		return nil, fmt.Errorf("only applies are adopted, not %s", req.Op)
	}
	res := &v1alpha1.InfraResource{}
	if err := r.opts.APIReader.Get(ctx, types.NamespacedName{Name: req.Key}, res); err != nil {
		return nil, fmt.Errorf("resource %s: %w", req.Key, err)
	}
	last := res.Status.LastRun
	switch {
	case !res.DeletionTimestamp.IsZero():
		return nil, fmt.Errorf("resource %s is being deleted", req.Key)
	case res.Spec.RunnerPool != req.Pool:
		return nil, fmt.Errorf("resource %s runs on pool %q, not %q", req.Key, res.Spec.RunnerPool, req.Pool)
	case last == nil || last.ID != req.RunID || !adoptable(last):
		return nil, fmt.Errorf("run %s is not the last run of %s recorded Running", req.RunID, req.Key)
	case res.Status.State == nil || suffix(res) == "":
		return nil, fmt.Errorf("resource %s has no state name", req.Key)
	}
	creds, revoke, lockID, err := r.opts.StateServer.IssueAdoptedRun(ctx, req.RunID, suffix(res), stateLabels(res))
	if err != nil {
		return nil, err
	}
	lock := "it holds no lock now"
	if lockID != "" {
		lock = "its lock " + lockID + " is taken over"
	}
	r.opts.Recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonRunAdopted, "AdoptRun",
		"%s run %s started by %s on runner %s goes on under %s with new state credentials; %s",
		last.Operation, last.ID, orUnknown(last.Controller), req.Runner, orUnknown(r.opts.Identity.Controller), lock)
	return &runners.Adoption{Username: creds.Username, Password: creds.Password, Revoke: revoke}, nil
}

// RunAdopted is runners.DispatcherOptions.OnAdopted: the resource key is reconciled now, to attach
// to its adopted run (attachRun), not when its requeue comes.
func (r *Reconciler) RunAdopted(key string) {
	res := &v1alpha1.InfraResource{}
	res.Name = key
	select {
	case r.adoptions <- event.GenericEvent{Object: res}:
	default: // a reconcile of it is queued already, or the fence's requeue comes
	}
}

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
// and this manager adopted (AdoptRun): its events and outcome are recorded as those of a run this
// reconcile started (ranApply), and no other run starts. A resource whose last run is such a run,
// not adopted here (yet), waits until RunnerFence has passed since this manager began to lead: its
// runner may still resume it, and RunAdopted wakes the resource when it does; after that the run
// is dead (its runner killed it) and the next reconcile's recoverOwnLock releases its lock.
func (r *syncer) attachRun(ctx context.Context, s *resourceScope) (bool, error) {
	res := s.res
	last := res.Status.LastRun
	a, ok := r.runs.(Attacher)
	if !ok || res.Spec.RunnerPool == "" || !adoptable(last) {
		return false, nil
	}
	if last.StartTime != nil {
		s.runStart = last.StartTime.Time
	}
	out, attached, err := a.Attach(ctx, res.Name, last.ID, tfrunner.ApplyOptions{Events: runEvents(ctx, s)})
	if attached {
		// The outcome is that of the generation the run was started for: a spec changed since
		// is not marked applied (ObservedGeneration, conditions, the run record), and runs next.
		gen := res.Generation
		res.Generation = last.Generation
		stop, rerr := r.ranApply(ctx, s, out, err)
		res.Generation = gen
		if last.Generation != gen && rerr == nil {
			s.result = ctrl.Result{RequeueAfter: time.Second}
		}
		return stop, rerr
	}
	s.runStart = time.Time{}
	if k := r.keeper; !k.runLive(last.ID) && k.runnerFenced(s.res.Name) {
		wait := r.fence.runnerWait(s.res.Name)
		ctrl.LoggerFrom(ctx).Info("the last run, started by the previous leader on a runner pool, may still be resumed here: no run starts until then",
			"run", last.ID, "wait", wait.Round(time.Second).String())
		s.result = ctrl.Result{RequeueAfter: wait}
		return true, nil
	}
	return false, nil
}
