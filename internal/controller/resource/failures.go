package resource

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// How a run that did not succeed is recorded: the reason, the conditions, retry or not.

// describeChanges lists up to ten changes of a plan as " (address: actions, …)".
func describeChanges(p *tfjson.Plan) string {
	if p == nil || len(p.Changes) == 0 {
		return ""
	}
	var parts []string
	for i, c := range p.Changes {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(p.Changes)-10))
			break
		}
		parts = append(parts, c.Address+": "+strings.Join(c.Actions, "+"))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// QueueRetryInterval is how long after a run no runner took (runners.QueueTimeoutError) it is
// queued again.
const QueueRetryInterval = 30 * time.Second

// runFailed records a run that did not apply (classifyRun, recordOutcome): held plans, invalid
// inputs and a shutdown are not retried (a held plan until it is approved, inputs until the spec
// changes); Terraform errors and lock conflicts are returned so that the work queue retries them
// with exponential backoff.
func (r *syncer) runFailed(ctx context.Context, s *resourceScope, err error, at time.Time) (ctrl.Result, error) {
	o := classifyRun(s.res.Status.LastRun.Operation, err, at)
	if o.kind == outcomeLocked {
		metrics.LockConflict()
		r.keeper.LockHeld(ctx, s.res, s.state)
	}
	r.recordFailure(s.res, o)
	if o.reason == v1alpha1.ReasonWaitingForRunner {
		// No runner took the run (runners.QueueTimeoutError): the worker is free again, and the
		// run is queued anew at a steady pace, not with a backoff that grows while the pool is down.
		return ctrl.Result{RequeueAfter: QueueRetryInterval}, nil
	}
	if !o.retried() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, fmt.Errorf("resource %s: %w", s.res.Name, err)
}

func failReason(op string) string {
	switch op {
	case "init", "get":
		return v1alpha1.ReasonInitFailed
	case "plan", "show":
		return v1alpha1.ReasonPlanFailed
	case "import":
		return v1alpha1.ReasonImportFailed
	case "destroy":
		return v1alpha1.ReasonDestroyFailed
	default:
		return v1alpha1.ReasonApplyFailed
	}
}

// setRunFailed records a run that failed in operation op, before or after Terraform ran, with the
// condition reason and message that say why (recordFailure).
func (r *syncer) setRunFailed(res *v1alpha1.InfraResource, op, reason, message string, at time.Time) {
	r.recordFailure(res, runOutcome{kind: outcomeFailed, op: op, reason: reason, message: message, at: at})
}

// recordFailure computes the status of outcome o (recordOutcome; the phase a failure leaves is
// the one the resource has) and says why in a Warning event; a held plan's event is holdPlan's,
// once per plan.
func (r *syncer) recordFailure(res *v1alpha1.InfraResource, o runOutcome) {
	recordOutcome(&res.Status, res.Generation, o)
	if o.kind != outcomeHeld {
		r.recorder.Eventf(res, nil, corev1.EventTypeWarning, o.reason, "Sync", "%s", shared.Truncate(o.message, 1024))
	}
}
