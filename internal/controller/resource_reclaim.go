package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// finalize carries out the reclaim policy of a resource being deleted: Delete destroys the
// infrastructure and then deletes the state Secret; Retain orphans the state. Then the finalizer goes.
func (r *ResourceReconciler) finalize(ctx context.Context, res *v1alpha1.InfraResource) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(res, v1alpha1.FinalizerResource) {
		return ctrl.Result{}, nil
	}
	if r.Runs != nil {
		before := res.DeepCopy()
		res.Status.Phase = v1alpha1.ResourceDeleting
		if res.Spec.ReclaimPolicy == v1alpha1.ReclaimRetain {
			if err := statebackend.Orphan(ctx, r.Kube, r.State.Namespace, statebackend.DefaultWorkspace, suffix(res), statebackend.LabelValue(res.Name)); err != nil {
				return ctrl.Result{}, err
			}
			r.Recorder.Eventf(res, nil, corev1.EventTypeNormal, "StateOrphaned", "Reclaim",
				"reclaim policy Retain: infrastructure kept, state Secret %s labelled %s=%s",
				statebackend.SecretName(statebackend.DefaultWorkspace, suffix(res)), statebackend.LabelOrphanedFrom, statebackend.LabelValue(res.Name))
			r.Runs.Forget(res.Name)
		} else {
			if err := r.destroy(ctx, res, before); err != nil {
				if perr := r.Status().Patch(ctx, res, client.MergeFrom(before)); perr != nil && !apierrors.IsNotFound(perr) {
					err = errors.Join(err, perr)
				}
				return ctrl.Result{}, err
			}
		}
	}
	if r.Runs != nil {
		if err := r.deleteRunRecords(ctx, res); err != nil {
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(res, v1alpha1.FinalizerResource)
	return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, res))
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
	st, found, err := statebackend.Read(ctx, r.Kube, r.State.Namespace, statebackend.DefaultWorkspace, suffix(res))
	if err != nil {
		return err
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
