package resource

// A run's outcome and the status it gives the resource, as pure functions (cluster-api's style:
// status is computed, not set here and there). classifyRun turns what Runs returned into one typed
// runOutcome; recordOutcome computes status.lastRun, the phase and the Synced and Ready conditions
// from it. The callers add only what has side effects: events, metrics, the lock's holder.

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// outcomeKind is what a run came to.
type outcomeKind int

const (
	// outcomeFailed: the run failed; it is retried with backoff.
	outcomeFailed outcomeKind = iota
	// outcomeApplied: the infrastructure matches the spec (applied, or nothing to change).
	outcomeApplied
	// outcomeHeld: a plan waits for a person (approval, an interrupted create); not retried.
	outcomeHeld
	// outcomeInvalid: the run was refused before planning (inputs that do not fit the module);
	// not retried until the spec changes.
	outcomeInvalid
	// outcomeLocked: someone else holds the state lock; retried with backoff.
	outcomeLocked
	// outcomeCancelled: the controller is shutting down; the next leader runs it again.
	outcomeCancelled
)

// runOutcome is the one typed result of a run (or of the checks before it): what it came to, the
// operation that ended it, the condition reason and message people read, and when.
type runOutcome struct {
	kind    outcomeKind
	op      string
	reason  string
	message string
	at      time.Time
	// lock is who holds the lock that refused the run (outcomeLocked).
	lock *tfrunner.LockError
}

// classifyRun maps the error a run of operation op returned at at to its outcome (nil: applied):
// context.Canceled → Cancelled; *approvalNeeded → Held (reason per hold); *tfrunner.InputError and
// *provision.InputError → Invalid; *tfrunner.LockError → Locked (StateLocked); *tfrunner.RunError → Failed
// with the reason of the command that failed (failReason); anything else → Failed as op.
func classifyRun(op string, err error, at time.Time) runOutcome {
	o := runOutcome{op: op, at: at, kind: outcomeFailed, reason: failReason(op)}
	if err == nil {
		o.kind, o.reason = outcomeApplied, v1alpha1.ReasonApplied
		return o
	}
	o.message = err.Error()
	var (
		an  *approvalNeeded
		tie *tfrunner.InputError
		ie  *provision.InputError
		le  *tfrunner.LockError
		re  *tfrunner.RunError
		qe  *runners.QueueTimeoutError
	)
	switch {
	case errors.Is(err, context.Canceled):
		o.kind, o.message = outcomeCancelled, "run cancelled: the controller is shutting down"
	case errors.As(err, &an):
		o.kind, o.op, o.reason = outcomeHeld, "plan", an.conditionReason()
	case errors.As(err, &tie):
		o.kind, o.reason, o.message = outcomeInvalid, v1alpha1.ReasonInvalidVariables, tie.Problems
	case errors.As(err, &ie):
		o.kind, o.reason, o.message = outcomeInvalid, ie.Reason, ie.Message
	case errors.As(err, &le):
		o.kind, o.op, o.reason, o.lock = outcomeLocked, le.Op, v1alpha1.ReasonStateLocked, le
	case errors.As(err, &re):
		o.op, o.reason, o.message = re.Op, failReason(re.Op), re.Message
	case errors.As(err, &qe):
		o.reason = v1alpha1.ReasonWaitingForRunner
	}
	return o
}

// retried reports whether the work queue retries the outcome with backoff (the reconcile returns
// its error): failures and lock conflicts; not holds, invalid inputs or a shutdown.
func (o runOutcome) retried() bool { return o.kind == outcomeFailed || o.kind == outcomeLocked }

// lastRunResult is status.lastRun.result for the outcome.
func (o runOutcome) lastRunResult() v1alpha1.RunResult {
	switch o.kind {
	case outcomeApplied:
		return v1alpha1.RunSucceeded
	case outcomeHeld:
		return v1alpha1.RunWaitingForApproval
	case outcomeInvalid:
		return v1alpha1.RunInvalid
	}
	return v1alpha1.RunFailed
}

// recordOutcome computes the resource's status after outcome o: status.lastRun (operation,
// result, completion, message; a record of this generation's run is created when there is none),
// and Synced and Ready. The phase follows from them at the status write (phaseOf).
//
//   - Applied: Synced and Ready True (Applied), message the plan's summary.
//   - Anything else: Synced False with the outcome's reason; Ready stays True when it was after an
//     apply (the infrastructure that was applied is still there), else it goes False with Synced.
func recordOutcome(st *v1alpha1.InfraResourceStatus, generation int64, o runOutcome) {
	last := st.LastRun
	if last == nil || last.Generation != generation || last.StartTime == nil {
		last = &v1alpha1.RunStatus{StartTime: &metav1.Time{Time: o.at}, Generation: generation}
		beginRun(st, last)
	}
	if o.op != "" {
		last.Operation = o.op
	}
	last.Result = o.lastRunResult()
	last.CompletionTime = &metav1.Time{Time: o.at}
	applied := st.ObservedGeneration > 0
	if o.kind == outcomeApplied {
		last.Message = ""
		shared.SetCondition(&st.Conditions, generation, v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, o.message)
		shared.SetCondition(&st.Conditions, generation, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonApplied, "infrastructure matches the spec")
		return
	}
	last.Message = o.message
	shared.SetCondition(&st.Conditions, generation, v1alpha1.ConditionSynced, metav1.ConditionFalse, o.reason, o.message)
	if !applied || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) {
		shared.SetCondition(&st.Conditions, generation, v1alpha1.ConditionReady, metav1.ConditionFalse, o.reason, o.message)
	}
}

// phaseInputs is what a resource's phase follows from: what the reconcile observed and the status
// it computed.
type phaseInputs struct {
	// deleting: the object is deleted and its reclaim policy is being carried out (reclaimInfra).
	deleting bool
	// binding is the phase the claim gives the resource (bindingPhase); "" when this reconcile
	// did not observe it (it ended before observeBinding).
	binding v1alpha1.ResourcePhase
	// runs: the reconciler has runs (without, nothing is ever provisioned: the binding suites).
	runs bool
	// applied: an apply of some generation succeeded (status.observedGeneration > 0).
	applied bool
	// last is status.lastRun as computed.
	last *v1alpha1.RunStatus
	// previous is the phase as last written.
	previous v1alpha1.ResourcePhase
	// discovered: a discovered resource that was never applied (waitsForClaim), and lost: its
	// class's last listing no longer found its object.
	discovered, lost bool
}

// phaseOf computes status.phase, once, at each status write (as cluster-api's setPhase), from
// the inputs alone:
//
//   - Deleting while the reclaim policy of a deleted object is carried out.
//   - Unobserved binding: the phase as last written.
//   - Released once the claim is gone (bindingPhase keeps it).
//   - A discovered resource never applied and unbound: Available, or Lost when its class's last
//     listing no longer found its object.
//   - Without runs, or once applied: the binding's phase, Available or Bound (a failed run of an
//     applied resource leaves its infrastructure there: Synced and Ready say the rest).
//   - Before any apply, by the last run: none yet, Pending; Running, Provisioning (Failed while a
//     failed first provisioning is retried); WaitingForApproval, Pending (a person decides);
//     Failed or Invalid, Failed.
func phaseOf(in phaseInputs) v1alpha1.ResourcePhase {
	switch {
	case in.deleting:
		return v1alpha1.ResourceDeleting
	case in.binding == "":
		return in.previous
	case in.binding == v1alpha1.ResourceReleased, !in.runs, in.applied:
		return in.binding
	case in.discovered && in.binding == v1alpha1.ResourceAvailable && in.lost:
		return v1alpha1.ResourceLost
	case in.discovered && in.binding == v1alpha1.ResourceAvailable:
		return in.binding
	case in.last == nil:
		return v1alpha1.ResourcePending
	}
	switch in.last.Result {
	case v1alpha1.RunRunning:
		if in.previous == v1alpha1.ResourceFailed {
			return v1alpha1.ResourceFailed
		}
		return v1alpha1.ResourceProvisioning
	case v1alpha1.RunWaitingForApproval:
		return v1alpha1.ResourcePending
	case v1alpha1.RunSucceeded:
		return in.binding
	}
	return v1alpha1.ResourceFailed
}
