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
func (o runOutcome) lastRunResult() string {
	switch o.kind {
	case outcomeApplied:
		return RunSucceeded
	case outcomeHeld:
		return RunWaitingForApproval
	case outcomeInvalid:
		return RunInvalid
	}
	return RunFailed
}

// recordOutcome computes the resource's status after outcome o, for a resource whose claim gives
// it phase bound (bindingPhase): status.lastRun (operation, result, completion, message; a record
// of this generation's run is created when there is none), the phase, and Synced and Ready.
//
//   - Applied: the bound phase; Synced and Ready True (Applied), message the plan's summary.
//   - Held before any apply: Pending (waiting for a person, not failed).
//   - Anything else before any apply: Failed.
//   - After an apply, the phase stays; Ready stays True when it was (the infrastructure that was
//     applied is still there), else it goes False with Synced.
func recordOutcome(st *v1alpha1.InfraResourceStatus, generation int64, bound v1alpha1.ResourcePhase, o runOutcome) {
	last := st.LastRun
	if last == nil || last.Generation != generation || last.StartTime == nil {
		last = &v1alpha1.RunStatus{StartTime: &metav1.Time{Time: o.at}, Generation: generation}
		st.LastRun = last
	}
	if o.op != "" {
		last.Operation = o.op
	}
	last.Result = o.lastRunResult()
	last.CompletionTime = &metav1.Time{Time: o.at}
	applied := st.ObservedGeneration > 0
	if o.kind == outcomeApplied {
		last.Message = ""
		st.Phase = bound
		shared.SetCondition(&st.Conditions, generation, v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, o.message)
		shared.SetCondition(&st.Conditions, generation, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonApplied, "infrastructure matches the spec")
		return
	}
	last.Message = o.message
	switch {
	case applied:
	case o.kind == outcomeHeld:
		st.Phase = v1alpha1.ResourcePending
	default:
		st.Phase = v1alpha1.ResourceFailed
	}
	shared.SetCondition(&st.Conditions, generation, v1alpha1.ConditionSynced, metav1.ConditionFalse, o.reason, o.message)
	if !applied || !meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) {
		shared.SetCondition(&st.Conditions, generation, v1alpha1.ConditionReady, metav1.ConditionFalse, o.reason, o.message)
	}
}
