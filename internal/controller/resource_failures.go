package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// How a run that did not succeed is recorded: the reason, the conditions, retry or not.

// describeChanges lists up to ten changes of a plan as " (address: actions, …)".
func describeChanges(p *tfrunner.Plan) string {
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

// runFailed records a failed run; input errors are not retried until the spec changes, Terraform
// errors are returned so that the work queue retries them with exponential backoff.
func (r *ResourceReconciler) runFailed(ctx context.Context, s *resourceScope, err error, at time.Time) (ctrl.Result, error) {
	res := s.res
	var ie *inputError
	var le *tfrunner.LockError
	var re *tfrunner.RunError
	var an *approvalNeeded
	switch {
	case errors.Is(err, context.Canceled):
		r.setRunFailed(res, res.Status.LastRun.Operation, failReason(res.Status.LastRun.Operation), "run cancelled: the controller is shutting down", at)
		return ctrl.Result{}, nil
	case errors.As(err, &an):
		r.setRunFailed(res, "plan", an.conditionReason(), an.Error(), at)
		res.Status.LastRun.Result = RunWaitingForApproval
		if !everApplied(res) {
			res.Status.Phase = v1alpha1.ResourcePending // not failed: waiting for a person
		}
		return ctrl.Result{}, nil
	case errors.As(err, &ie):
		r.setRunFailed(res, res.Status.LastRun.Operation, ie.reason, ie.message, at)
		res.Status.LastRun.Result = RunInvalid
		return ctrl.Result{}, nil
	case errors.As(err, &le):
		metrics.LockConflict()
		r.lockHeld(ctx, s)
		r.setRunFailed(res, le.Op, v1alpha1.ReasonStateLocked, le.Error(), at)
	case errors.As(err, &re):
		r.setRunFailed(res, re.Op, failReason(re.Op), re.Message, at)
	default:
		r.setRunFailed(res, res.Status.LastRun.Operation, failReason(res.Status.LastRun.Operation), err.Error(), at)
	}
	return ctrl.Result{}, fmt.Errorf("resource %s: %w", res.Name, err)
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

// setRunFailed records a run that ended in failure, and the conditions that say why.
func (r *ResourceReconciler) setRunFailed(res *v1alpha1.InfraResource, op, reason, message string, at time.Time) {
	if res.Status.LastRun == nil || res.Status.LastRun.Generation != res.Generation || res.Status.LastRun.StartTime == nil {
		res.Status.LastRun = &v1alpha1.RunStatus{StartTime: &metav1.Time{Time: at}, Generation: res.Generation}
	}
	res.Status.LastRun.Operation = op
	res.Status.LastRun.Result = RunFailed
	res.Status.LastRun.CompletionTime = &metav1.Time{Time: at}
	res.Status.LastRun.Message = message
	if !everApplied(res) {
		res.Status.Phase = v1alpha1.ResourceFailed
	}
	setCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionSynced, metav1.ConditionFalse, reason, message)
	if c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || !everApplied(res) {
		setCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, message)
	}
	r.Recorder.Eventf(res, nil, corev1.EventTypeWarning, reason, "Sync", "%s", truncate(message, 1024))
}
