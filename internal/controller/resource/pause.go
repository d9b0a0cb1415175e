package resource

// Pause, sync now and the per-resource sync interval, as Crossplane and Flux offer them:
//   - conductor.io/paused=true stops the run phases before anything is decided (no plan, apply or
//     drift check; a run under way finishes); deletion still reclaims. Removing it resumes, with a
//     run at once (a drift check when the spec was applied).
//   - conductor.io/reconcile-requested-at makes a run due now; the run that answers echoes the
//     value in status.lastHandledReconcileAt when it starts, not when it is decided, so a request
//     that waits (a drift slot, a pause) is still pending.
//   - spec.syncInterval (copied from the class's) replaces the manager's --sync-interval.

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// paused reports whether res carries conductor.io/paused=true.
func paused(res *v1alpha1.InfraResource) bool {
	return res.Annotations[v1alpha1.AnnotationPaused] == "true"
}

// reconcileRequested reports whether res asks for a sync (conductor.io/reconcile-requested-at)
// that no run has answered yet.
func reconcileRequested(res *v1alpha1.InfraResource) bool {
	v := res.Annotations[v1alpha1.AnnotationReconcileRequestedAt]
	return v != "" && v != res.Status.LastHandledReconcileAt
}

// runAsked reports whether a run is due because a person asked for one: a sync request, or the
// end of a pause (s.resumed). A plan that waits for approval is not planned again for either: it
// waits for a person, and a new plan would discard the one they are reviewing. A plan a Deny rule
// refused waits for no one: a sync request plans it again (the world may have changed).
func runAsked(s *resourceScope) bool {
	if last := s.res.Status.LastRun; last != nil && last.Result == v1alpha1.RunWaitingForApproval {
		pp := s.res.Status.PendingPlan
		return pp != nil && pp.Reason == v1alpha1.HoldPolicyDenied && reconcileRequested(s.res)
	}
	return s.resumed || reconcileRequested(s.res)
}

// handleReconcileRequest echoes res's reconcile request in status.lastHandledReconcileAt, as the
// run that answers it starts, and returns the value it replaced (for restoreReconcileRequest).
func handleReconcileRequest(res *v1alpha1.InfraResource) (prev string) {
	prev = res.Status.LastHandledReconcileAt
	if v := res.Annotations[v1alpha1.AnnotationReconcileRequestedAt]; v != "" {
		res.Status.LastHandledReconcileAt = v
	}
	return prev
}

// restoreReconcileRequest puts back what handleReconcileRequest replaced, when the run that was to
// answer the request did not happen (a failed drift check): the request stays pending.
func restoreReconcileRequest(res *v1alpha1.InfraResource, prev string) {
	res.Status.LastHandledReconcileAt = prev
}

// interval is res's sync interval: spec.syncInterval when set, else def (the manager's).
func interval(res *v1alpha1.InfraResource, def time.Duration) time.Duration {
	if d := res.Spec.SyncInterval; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return def
}

// holdWhilePaused ends the reconcile of a paused resource with Synced=False ReconcilePaused and no
// requeue: removing the annotation wakes the resource (the controller watches annotation changes).
// A resource that was paused and is no more leaves ReconcilePaused (markResumed) and decideRun
// runs it at once.
func (r *syncer) holdWhilePaused(_ context.Context, s *resourceScope) (ctrl.Result, error) {
	if !paused(s.res) {
		s.resumed = markResumed(s.res)
		return ctrl.Result{}, nil
	}
	markPaused(s.res)
	return s.end(ctrl.Result{}), nil
}
