package resource

// The run phases of a resource's reconcile (see Reconcile): decide whether a run is due, prepare
// it (the state phases, its inputs), then apply — or plan, wait for approval, and apply — and
// record the outcome. Each changes the scope's status in memory; only the checkpoints a crash
// needs are written before the reconcile's one status patch.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/secrets"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// decideRun ends the reconcile unless a run is due (needsRun at the resource's sync interval, a
// run asked for by a sync request or a resume, or a Secret input rotated since the last apply);
// an idle resource keeps its phase and connection Secret until the next sync, and the reconcile
// ends with when that is.
func (r *syncer) decideRun(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	res := s.res
	var ip *invalidPolicy
	if err := r.preparePolicy(ctx, s); errors.As(err, &ip) {
		s.policyErr = ip // a run that is due fails on it (prepareRun)
	} else if err != nil {
		return ctrl.Result{}, err
	}
	run, wait := needsRun(res, s.start, interval(res, r.syncInterval))
	run = run || runAsked(s) || policyMoved(s)
	if !run && state.EverApplied(res) && hasSecretInputs(res) && res.Status.LastRun.Result == v1alpha1.RunSucceeded {
		changed, err := r.secretInputsRotated(ctx, res)
		if err != nil {
			return ctrl.Result{}, err
		}
		if changed {
			r.noteRotation(res)
			run = true
		} else {
			wait = min(wait, r.secretCheckInterval)
		}
	}
	if run {
		return ctrl.Result{}, nil
	}
	if state.EverApplied(res) && res.Status.ConnectionSecret != nil {
		// A connection Secret deleted by hand is written again within this time (keepConnectionSecret).
		wait = min(wait, r.secretCheckInterval)
	}
	staleApproval(res)
	idle := s.end(ctrl.Result{RequeueAfter: wait})
	if !state.EverApplied(res) {
		return idle, nil
	}
	return idle, r.secrets.KeepConnectionSecret(ctx, s.res, s.state)
}

// prepareRun runs what every run needs first — recover a dead run's lock, adopt orphaned state,
// the state phases (beforeRun) — and reads the run's inputs into s.spec. A missing Secret input
// records the run as failed and is retried after secretRetry.
func (r *syncer) prepareRun(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	if res, err := r.beforeRun(ctx, s); s.ended || err != nil {
		return res, err
	}
	spec, err := r.secrets.RunSpec(ctx, s.res)
	var ie *provision.InputError
	if errors.As(err, &ie) {
		r.setRunFailed(s.res, "render", ie.Reason, ie.Message, time.Now())
		return s.end(ctrl.Result{RequeueAfter: secretRetry}), nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if ip := s.policyErr; ip != nil {
		// The class says so too (PolicyInvalid); its fix wakes the resource (the class watch).
		r.setRunFailed(s.res, "plan", v1alpha1.ReasonPolicyInvalid, ip.Error(), time.Now())
		return s.end(ctrl.Result{RequeueAfter: secretRetry}), nil
	}
	s.spec = spec
	return ctrl.Result{}, nil
}

// beforeRun runs the phases every run needs first: recover a dead run's lock, adopt orphaned
// state, and the state checks. When the run must not happen now it ends the reconcile (s.end)
// with when to try again; an error goes to the work queue.
func (r *syncer) beforeRun(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	res := s.res
	// A state a dead run could not save goes back first (it releases that run's lock once
	// saved); a lock is never recovered while it is pending, even after a restart.
	if err := r.keeper.PutBack(ctx, s.res, s.state); err != nil {
		return r.stateStop(s, "state", err)
	}
	if err := recoverLock(ctx, r.keeper, s); err != nil {
		var fenced *state.LockFenced
		if errors.As(err, &fenced) {
			return s.end(ctrl.Result{RequeueAfter: fenced.Wait}), nil
		}
		return ctrl.Result{}, err
	}
	if err := r.keeper.Adopt(ctx, s.res, s.state); err != nil {
		var ae *statebackend.AdoptError
		if errors.As(err, &ae) {
			r.setRunFailed(res, "adopt", v1alpha1.ReasonAdoptionRefused, ae.Message, time.Now())
			return s.end(ctrl.Result{RequeueAfter: secretRetry}), nil
		}
		return ctrl.Result{}, err
	}
	if err := r.stateChecks(ctx, s); err != nil {
		return r.stateStop(s, "state", err)
	}
	return ctrl.Result{}, nil
}

// stateStop turns a state phase's error into the end of the reconcile: a *state.Error is recorded
// as the failed operation op and retried after stateRetry; any other error goes to the work queue.
func (r *syncer) stateStop(s *resourceScope, op string, err error) (ctrl.Result, error) {
	var se *state.Error
	if errors.As(err, &se) {
		r.setRunFailed(s.res, op, se.Reason, se.Message, time.Now())
		return s.end(ctrl.Result{RequeueAfter: stateRetry}), nil
	}
	return ctrl.Result{}, err
}

// applyPhase brings the infrastructure to the spec: one apply -json, or, when the run must stop
// between plan and apply (needsSavedPlan), plan, the approval gate, and apply of that plan. The
// Running record is a checkpoint: every command of the run may take the state lock, so it is
// written before the first of them (the crash window recoverOwnLock closes).
func (r *syncer) applyPhase(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	res := s.res
	savedPlan := needsSavedPlan(res) || len(s.policy) > 0
	op := "apply"
	if savedPlan {
		op = "plan"
	}
	// The Running record is written by the run's first event (Queued or Started, runEvents),
	// before its first command: a run that waits for a slot writes it once, with its place in line.
	beginRun(&res.Status, r.identity.newRun(res, op, s.start))
	handleReconcileRequest(res)
	revoke := r.keeper.UseBackend(s.res, &s.spec)
	defer revoke()
	runCtx, stop := s.untilHandover(ctx)
	defer stop()
	out, err := r.runs.Apply(runCtx, res.Name, s.spec, r.applyOptions(ctx, s, savedPlan))
	return r.ranApply(ctx, s, out, s.handedOver(err))
}

// ranApply records the outcome of an apply (or plan) run, out and err as Runs.Apply returned them:
// a plan held for approval, creates settled, imports and resolutions, the run's log, and then the
// failure (runFailed) or the success (applied). It ends the reconcile: a success comes back after
// the sync interval (jittered), a failure as runFailed says.
func (r *syncer) ranApply(ctx context.Context, s *resourceScope, out *tfrunner.ApplyResult, err error) (ctrl.Result, error) {
	res := s.res
	if err == nil && out.Held != nil {
		err = r.holdPlan(ctx, res, out.Held, policyDigest(s.policy, s.facts))
	}
	done := time.Now()
	var ended []string
	if out != nil {
		ended = out.Ended
	}
	settleCreates(res, ended, err, r.keeper.Stored(s.state))
	defer func() {
		// From the Started event, kept on the scope: a checkpoint or the outcome may replace
		// status.lastRun meanwhile (recordOutcome starts a new record when the generation moved).
		began := s.runStart
		if began.IsZero() {
			began = s.start
		}
		metrics.ObserveRun(res.Status.LastRun.Operation, runResult(res.Status.LastRun, err), done.Sub(began))
	}()
	if out != nil && out.Plan != nil {
		if res.Status.LastRun.Summary == nil {
			res.Status.LastRun.Summary = summaryOf(out.Plan)
		}
		res.Status.LastRun.PlanID = out.Plan.ID
	}
	if out != nil {
		recordImports(res, out.Imports)
		r.recordResolutions(res, out.Resolutions)
		defer func() { r.secrets.RecordRun(ctx, res, out.Log) }()
	}
	if err != nil {
		result, ferr := r.runFailed(ctx, s, err, done)
		return s.end(result), ferr
	}
	if err := r.applied(ctx, s, out, done); err != nil {
		return s.end(ctrl.Result{}), err
	}
	return s.end(ctrl.Result{RequeueAfter: shared.Jitter(interval(res, r.syncInterval))}), nil
}

// applyOptions are the resource's apply as data: the variables checked against the module's
// inputs by the run, the imports, the gate between plan and apply when the run must stop there
// (gateOf), and the sink of the run's events (runEvents).
func (r *syncer) applyOptions(ctx context.Context, s *resourceScope, savedPlan bool) tfrunner.ApplyOptions {
	opts := tfrunner.ApplyOptions{CheckInputs: true, Events: runEvents(ctx, s)}
	if savedPlan {
		opts.Gate = gateOf(s.res)
		opts.Gate.Policy, opts.Gate.Facts = s.policy, s.facts
	}
	for _, imp := range s.res.Spec.Import {
		opts.Imports = append(opts.Imports, tfrunner.ImportTarget{Address: imp.Address, ID: imp.ID})
	}
	return opts
}

// runEvents records the run's events in status, each a checkpoint: its place in line
// (Synced=Unknown, WaitingForRunner; the pools tell it only once a run has waited
// queue.QueuedAfter, so a short wait writes nothing), its start (the Running record, unless the
// place in line wrote it), each create's start and the plan the gate let through. The run goes on
// only once the last three are written; an error (the API server refused the write) stops it.
func runEvents(ctx context.Context, s *resourceScope) tfrunner.Events {
	res := s.res
	recorded := false // the Running record is durable
	return func(e tfrunner.Event) error {
		switch e := e.(type) {
		case tfrunner.Queued:
			markQueued(res, e.Position, e.Waiting)
			if err := s.checkpoint(ctx); err != nil {
				log.FromContext(ctx).V(1).Info("could not record the place in line", "error", err.Error())
			} else {
				recorded = true
			}
			return nil
		case tfrunner.Started:
			if err := s.startRun(); err != nil {
				return err // handed over while it waited: no command runs
			}
			s.runStart = time.Now()
			started(res.Status.LastRun, s.runStart)
			if recorded {
				return nil
			}
		case tfrunner.CreateStarted:
			if !createStarted(res, e.Address) {
				return nil
			}
		case tfrunner.Applying:
			planPassed(res, e.Plan)
		}
		err := s.checkpoint(ctx)
		recorded = recorded || err == nil
		return err
	}
}

// applied records a successful run: the connection Secret, the one-shot annotations it used, and
// status (outputs, state, Synced and Ready, drift corrected).
func (r *syncer) applied(ctx context.Context, s *resourceScope, out *tfrunner.ApplyResult, done time.Time) error {
	res := s.res
	if err := r.secrets.WriteConnectionSecret(ctx, res, secrets.WithPasswords(res, out.Outputs, s.spec.EphemeralVariables)); err != nil {
		r.setRunFailed(res, "output", v1alpha1.ReasonApplyFailed, err.Error(), done)
		return err
	}
	if err := r.secrets.PasswordsApplied(ctx, res, s.spec.EphemeralVariables); err != nil {
		return err
	}
	if err := r.consumeAnnotations(ctx, res, out.Applied); err != nil {
		return err
	}
	last := res.Status.LastRun
	res.Status.ObservedGeneration = res.Generation
	res.Status.InputsHash = inputsHash(res, s.spec)
	res.Status.ModuleVersion = res.Spec.Module.Version
	if out.Schema != nil && out.Schema.Version != "" {
		res.Status.ModuleVersion = out.Schema.Version // a registry constraint, resolved by init
	}
	res.Status.PendingPlan = nil
	if omitted := setOutputs(res, out.Outputs); len(omitted) > 0 {
		r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonOutputsNotInStatus, "Apply",
			"outputs %s are not in status: each may take %d bytes and all %d together; they are in the connection Secret",
			strings.Join(omitted, ", "), MaxStatusOutputBytes, MaxStatusOutputsBytes)
	}
	r.keeper.Read(ctx, s.res, s.state)
	sum := v1alpha1.PlanSummary{}
	if last.Summary != nil {
		sum = *last.Summary
	}
	msg := fmt.Sprintf("plan: %d to add, %d to change, %d to destroy%s", sum.Add, sum.Change, sum.Destroy, describeChanges(out.Plan))
	o := runOutcome{kind: outcomeApplied, reason: v1alpha1.ReasonApplied, message: msg, at: done}
	if !out.Applied {
		o.op = "plan"
	}
	recordOutcome(&res.Status, res.Generation, o)
	if res.Status.Drift != nil && res.Status.Drift.Drifted && out.Applied {
		markDrift(res, false, "the drift was corrected")
	}
	if out.Applied {
		r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonApplied, "Apply", "%s", msg)
	}
	return nil
}

// consumeAnnotations removes the one-shot annotations a successful run used: an approval is for
// one plan, starting from empty state is allowed once.
func (r *syncer) consumeAnnotations(ctx context.Context, res *v1alpha1.InfraResource, applied bool) error {
	keys := []string{v1alpha1.AnnotationStartFresh}
	if applied {
		keys = append(keys, v1alpha1.AnnotationApprovePlan, v1alpha1.AnnotationApproveReplace)
	}
	for _, k := range keys {
		if _, ok := res.Annotations[k]; ok {
			if err := removeAnnotation(ctx, r.api, res, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// DefaultSyncInterval is how often an unchanged resource is planned again to detect drift.
const DefaultSyncInterval = 10 * time.Minute

// stateRetry is how soon a resource whose state stops its runs (not saved, missing, a failed
// restore) is tried again.
const stateRetry = 10 * time.Second

// secretRetry is how soon a resource whose Secret input is missing is tried again.
const secretRetry = 30 * time.Second
