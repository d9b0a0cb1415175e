package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Reclaim: what deleting a resource does to its infrastructure and state (the reclaim policy).

// finalize runs the deletion phases of a resource, in order:
//  1. protect: a Bound resource waits until its claim is gone (FinalizerInUse, as pv-protection);
//  2. reclaim: Delete destroys the infrastructure and then deletes the state Secret; Retain
//     orphans the state; a state that is not the resource's own is left as it is;
//  3. the reclaim finalizer goes.
func (r *ResourceReconciler) finalize(ctx context.Context, res *v1alpha1.InfraResource) (ctrl.Result, error) {
	if controllerutil.ContainsFinalizer(res, v1alpha1.FinalizerInUse) {
		if result, err, wait := r.protect(ctx, res); wait || err != nil {
			return result, err
		}
	}
	if !controllerutil.ContainsFinalizer(res, v1alpha1.FinalizerResource) {
		return ctrl.Result{}, nil
	}
	if r.Runs != nil && suffix(res) != "" {
		before := res.DeepCopy()
		res.Status.Phase = v1alpha1.ResourceDeleting
		result, err, wait := r.reclaim(ctx, res, before)
		if perr := r.Status().Patch(ctx, res, client.MergeFrom(before)); perr != nil && !apierrors.IsNotFound(perr) {
			err = errors.Join(err, perr)
		}
		if wait || err != nil {
			return result, err
		}
		if err := r.deleteRunRecords(ctx, res); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(res, v1alpha1.FinalizerResource)
	return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, res))
}

// protect keeps a resource being deleted while it is bound to a live claim (the claimRef's UID
// matches a claim that is not being deleted), as the pv-protection controller keeps a PV
// (pkg/controller/volume/pvprotection: isBeingUsed); it says so once in an event and in the Ready
// condition, and waits for the claim's deletion (the claim watch requeues the resource). When the
// resource is not in use, FinalizerInUse is removed. wait says the deletion must not go on.
func (r *ResourceReconciler) protect(ctx context.Context, res *v1alpha1.InfraResource) (ctrl.Result, error, bool) {
	claimState, err := r.observeClaim(ctx, res)
	if err != nil {
		return ctrl.Result{}, err, true
	}
	if claimState == claimLive {
		before := res.DeepCopy()
		ref := res.Spec.ClaimRef
		msg := fmt.Sprintf("deletion waits: the resource is bound to claim %s/%s; it is deleted once the claim is gone", ref.Namespace, ref.Name)
		if c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonResourceInUse {
			r.Recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonResourceInUse, "Delete", "%s", msg)
		}
		setCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonResourceInUse, msg)
		if err := r.Status().Patch(ctx, res, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err), true
		}
		return ctrl.Result{}, nil, true
	}
	controllerutil.RemoveFinalizer(res, v1alpha1.FinalizerInUse)
	if err := r.Update(ctx, res); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err), true
	}
	return ctrl.Result{}, nil, false
}

// reclaim carries out the reclaim policy on the resource's own state: Retain orphans it, Delete
// destroys the infrastructure and deletes it. A state under the resource's name that another
// resource orphaned (an adoption that was refused or never asked for) is not its own: it is
// neither destroyed, nor deleted, nor relabelled. wait says the finalizer must stay for now.
func (r *ResourceReconciler) reclaim(ctx context.Context, res, before *v1alpha1.InfraResource) (ctrl.Result, error, bool) {
	orphanedFrom, err := statebackend.OrphanedFrom(ctx, r.Kube, r.State.Namespace, statebackend.DefaultWorkspace, suffix(res))
	if err != nil {
		return ctrl.Result{}, err, true
	}
	if orphanedFrom != "" {
		r.Recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateNotOwned, "Reclaim",
			"state Secret %s is the orphaned state of the deleted resource %s, never adopted by this one: left as it is, and no destroy",
			statebackend.SecretName(statebackend.DefaultWorkspace, suffix(res)), orphanedFrom)
		r.Runs.Forget(res.Name)
		return ctrl.Result{}, nil, false
	}
	if res.Spec.ReclaimPolicy == v1alpha1.ReclaimRetain {
		// The orphaned state must be the newest: a state a run could not save goes back first.
		if err := r.putBackState(ctx, res); err != nil {
			return r.stateStop(res, "orphan", err)
		}
		if err := statebackend.Orphan(ctx, r.Kube, r.State.Namespace, statebackend.DefaultWorkspace, suffix(res), statebackend.LabelValue(res.Name)); err != nil {
			return ctrl.Result{}, err, true
		}
		r.Recorder.Eventf(res, nil, corev1.EventTypeNormal, "StateOrphaned", "Reclaim",
			"reclaim policy Retain: infrastructure kept, state Secret %s labelled %s=%s",
			statebackend.SecretName(statebackend.DefaultWorkspace, suffix(res)), statebackend.LabelOrphanedFrom, statebackend.LabelValue(res.Name))
		r.Runs.Forget(res.Name)
		return ctrl.Result{}, nil, false
	}
	if err := r.destroy(ctx, res, before); err != nil {
		var se *stateError
		if errors.As(err, &se) {
			return ctrl.Result{RequeueAfter: stateRetry}, nil, true
		}
		return ctrl.Result{}, err, true
	}
	return ctrl.Result{}, nil, false
}

// deleteRunRecords deletes the resource's plan and log Secrets (they are also owned by the
// resource, so the garbage collector removes any a crash left behind).
func (r *ResourceReconciler) deleteRunRecords(ctx context.Context, res *v1alpha1.InfraResource) error {
	for _, name := range []string{planSecretName(res), logSecretName(res)} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.State.Namespace, Name: name}}
		if err := r.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Secret %s/%s: %w", r.State.Namespace, name, err)
		}
	}
	return nil
}

// destroy runs terraform destroy (when there is state), then deletes the state Secret and Lease.
// Like every run it first releases its own stale lock and records itself as Running.
func (r *ResourceReconciler) destroy(ctx context.Context, res, before *v1alpha1.InfraResource) error {
	// A state a run could not save is saved first: destroy must see every object.
	if err := r.putBackState(ctx, res); err != nil {
		var se *stateError
		if errors.As(err, &se) {
			r.setRunFailed(res, "destroy", se.reason, se.message, time.Now())
		}
		return err
	}
	// An operator's restore of a missing state (stateMissingOnDelete) is carried out here too.
	if err := r.restoreState(ctx, res); err != nil {
		var se *stateError
		if errors.As(err, &se) {
			r.setRunFailed(res, "destroy", se.reason, se.message, time.Now())
		}
		return err
	}
	st, found, err := statebackend.Read(ctx, r.Kube, r.State.Namespace, statebackend.DefaultWorkspace, suffix(res))
	if err != nil {
		return err
	}
	if !found {
		if err := r.stateMissingOnDelete(res); err != nil {
			return err
		}
	}
	if len(res.Status.CreatesPending) > 0 {
		// Destroy sees only what the state holds: say what a dead run may have left outside it.
		r.Recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonInterruptedCreate, "Reclaim",
			"a run that died had started creating %s; if it did, no state holds it and destroy cannot remove it: look for it",
			strings.Join(res.Status.CreatesPending, ", "))
	}
	if found && st.Resources > 0 {
		spec, err := r.runSpec(ctx, res)
		if err != nil {
			r.setRunFailed(res, "destroy", v1alpha1.ReasonDestroyFailed, err.Error(), time.Now())
			return err
		}
		if err := r.recoverOwnLock(ctx, res); err != nil {
			return err
		}
		res.Status.LastRun = r.newRun(res, "destroy", time.Now())
		if err := r.record(ctx, res, before); err != nil {
			return err
		}
		revoke := r.backend(res, &spec)
		err = r.Runs.Destroy(ctx, res.Name, spec)
		revoke()
		metrics.ObserveRun("destroy", runResult(nil, err), time.Since(res.Status.LastRun.StartTime.Time))
		if err != nil {
			msg := err.Error()
			var re *tfrunner.RunError
			if errors.As(err, &re) {
				msg = re.Message
			}
			r.setRunFailed(res, "destroy", v1alpha1.ReasonDestroyFailed, msg, time.Now())
			return err
		}
		r.Recorder.Eventf(res, nil, corev1.EventTypeNormal, "Destroyed", "Reclaim", "reclaim policy Delete: infrastructure destroyed")
	}
	r.Runs.Forget(res.Name)
	return statebackend.Delete(ctx, r.Kube, r.State.Namespace, statebackend.DefaultWorkspace, suffix(res))
}

// stateMissingOnDelete decides a Delete reclaim whose state is missing. A resource that never
// applied has nothing to destroy. One that applied (its infrastructure exists, and nothing says
// where) keeps its finalizer with reason StateMissing, until the state is restored, or an operator
// annotates conductor.io/abandon=true (the infrastructure is left, an event says so) or
// conductor.io/start-fresh=true (there is nothing left to destroy). It returns a *stateError to wait.
func (r *ResourceReconciler) stateMissingOnDelete(res *v1alpha1.InfraResource) error {
	applied := everApplied(res) || serialOf(res) > 0
	switch {
	case !applied:
		return nil
	case res.Annotations[v1alpha1.AnnotationAbandon] == "true":
		r.Recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonAbandoned, "Reclaim",
			"%s=true: the state is missing and the infrastructure was not destroyed; it is left as it is", v1alpha1.AnnotationAbandon)
		return nil
	case res.Annotations[v1alpha1.AnnotationStartFresh] == "true":
		return nil
	}
	msg := fmt.Sprintf("reclaim policy Delete, but the state %s of this applied resource (serial %d) is missing: nothing is destroyed "+
		"and the resource stays until the state is restored (kubectl conductor restore-state, or the %s annotation), "+
		"or %s=true leaves the infrastructure as it is, or %s=true says nothing is left to destroy",
		statebackend.SecretName(statebackend.DefaultWorkspace, suffix(res)), serialOf(res), v1alpha1.AnnotationRestoreState,
		v1alpha1.AnnotationAbandon, v1alpha1.AnnotationStartFresh)
	r.setRunFailed(res, "destroy", v1alpha1.ReasonStateMissing, msg, time.Now())
	return &stateError{v1alpha1.ReasonStateMissing, msg}
}
