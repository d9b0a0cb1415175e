package resource

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/policy"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// resourceScope is one reconcile of one InfraResource, as cluster-api's reconcilers hold a scope
// (the object, a patch helper, what the phases found): the resource as read, the status as last
// written (base, from which every status patch is computed), and what the phases observed. Phases
// change the status in memory and return their result (runPhases aggregates them); close writes
// the status once, at the end.
//
// The only status writes before close are checkpoints: the records that must be durable before a
// side effect, because a crash right after it must find them (the Running record before a run's
// first command, a create's start before the apply reads on, a drift to correct before the apply).
type resourceScope struct {
	c    client.Client
	runs bool // the reconciler provisions (provisioner.provisions; phaseOf)
	res  *v1alpha1.InfraResource
	base *v1alpha1.InfraResource

	claim claimState             // what observeClaim found
	phase v1alpha1.ResourcePhase // the phase the claim gives the resource (bindingPhase)
	class *v1alpha1.InfraClass   // the resource's class, nil when static or gone
	start time.Time              // when the reconcile began deciding a run
	// runStart is when the run got its runner slot (the Started event); zero until then.
	runStart time.Time
	spec     tfrunner.Spec // the run's inputs, once readInputs read them
	// policy and facts are the class's plan rules and what they see (preparePolicy).
	policy    []policy.Rule
	facts     policy.Facts
	policyErr *invalidPolicy // the class's rules cannot be read: no run starts
	// state is the resource's one state handle (Secret, Lease, history), labelled with the
	// resource; nil until its name is chosen (nameState). Every state read and write goes through it.
	state *statebackend.Handle

	// reclaiming: the reclaim policy is being carried out (reclaimInfra): the phase is Deleting.
	reclaiming bool
	// resumed: the resource was paused until this reconcile (holdWhilePaused): a run is due.
	resumed bool

	// handover is closed when this replica begins to hand the resource's bucket over (sharding;
	// nil without); runState says whether the run started first (untilHandover, startRun).
	handover <-chan struct{}
	runState atomic.Int32
	// lost is closed when this replica lost the bucket without handing it over (sharding; nil
	// without): nothing more is written (patch refuses, close skips).
	lost <-chan struct{}
	// reader reads the resource from the API server when a status write conflicts (patch).
	reader client.Reader

	// ended: a phase settled what this reconcile does (end): no later phase runs.
	ended bool
	gone  bool // the object was deleted in this reconcile: nothing to write
}

// resourcePhase is one phase of a resource's reconcile, as cluster-api's machine controller runs
// its phases: it returns when to reconcile again (zero: only on a watch event) and an error for the
// work queue. A phase that settles the reconcile (nothing is due, a run was recorded, the object
// is gone) says so with s.end; an error ends the reconcile too: no phase after a failed one runs,
// since later phases start runs that the failed one must come before.
type resourcePhase func(ctx context.Context, s *resourceScope) (ctrl.Result, error)

// end marks the reconcile settled after the phase returning (no later phase runs) and returns
// result, for the phase to return: `return s.end(ctrl.Result{RequeueAfter: wait}), nil`.
func (s *resourceScope) end(result ctrl.Result) ctrl.Result {
	s.ended = true
	return result
}

// openScope reads the resource; nil, nil when it is gone. A Running record in the cache is either
// a run that died with the controller or this controller's own record whose outcome the cache
// has not caught up with, so then the resource is read from the API server.
func (r *Reconciler) openScope(ctx context.Context, name types.NamespacedName) (*resourceScope, error) {
	res := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, name, res); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if last := res.Status.LastRun; last != nil && last.Result == v1alpha1.RunRunning && r.opts.APIReader != nil {
		if err := r.opts.APIReader.Get(ctx, name, res); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
	}
	s := &resourceScope{c: r.Client, reader: r.opts.APIReader, runs: r.parts().provision.provisions(), res: res, base: res.DeepCopy(), start: time.Now()}
	if s.reader == nil {
		s.reader = r.Client
	}
	if state.Suffix(res) != "" {
		s.state = r.keeper().Handle(res)
	}
	return s, nil
}

// runPhases runs phases in order until one ends the reconcile (s.end) or fails, then writes the
// status once (close). The result is the soonest of the phases' results (shared.LowestNonZeroResult,
// as cluster-api aggregates its phases'); conflicts are requeued after shared.RetryDelay, as every
// writer here does.
func runPhases(ctx context.Context, s *resourceScope, phases ...resourcePhase) (ctrl.Result, error) {
	var result ctrl.Result
	var err error
	for _, phase := range phases {
		var res ctrl.Result
		res, err = phase(ctx, s)
		result = shared.LowestNonZeroResult(result, res)
		if s.ended || err != nil {
			break
		}
	}
	if cerr := s.close(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return shared.RequeueOnConflict(result, err)
}

// checkpoint writes the status as it is in memory now, before a side effect (see resourceScope);
// later changes still reach close's patch. An error means the record is not durable and the side
// effect must not happen.
func (s *resourceScope) checkpoint(ctx context.Context) error {
	if err := s.patch(ctx); err != nil {
		return fmt.Errorf("recording the run in status: %w", err)
	}
	return nil
}

// close writes the status once at the end of the reconcile when it differs from what was last
// written; nothing when it is unchanged, the object is gone, or the resource's bucket was lost
// (another replica may write it now). It writes even when the reconcile was cancelled by shutdown
// (a run's outcome must not be lost), within 10 s.
func (s *resourceScope) close(ctx context.Context) error {
	if s.gone || s.bucketLost() {
		return nil
	}
	return client.IgnoreNotFound(s.patch(ctx))
}

// patch computes the phase (phaseOf) and writes the status (writeStatus); base then moves forward
// to what was written. errBucketLost, writing nothing, once the resource's bucket was lost.
func (s *resourceScope) patch(ctx context.Context) error {
	if s.bucketLost() {
		return errBucketLost
	}
	st := &s.res.Status
	st.Phase = phaseOf(phaseInputs{deleting: s.reclaiming, binding: s.phase, runs: s.runs,
		applied: state.EverApplied(s.res), last: st.LastRun, previous: s.base.Status.Phase,
		discovered: s.res.Labels[v1alpha1.LabelDiscoveredBy] != "" && !state.EverApplied(s.res), lost: discoveryLost(s.res)})
	if err := s.writeStatus(ctx); err != nil {
		return err
	}
	s.base.ResourceVersion = s.res.ResourceVersion
	s.base.Status = *s.res.Status.DeepCopy()
	return nil
}
