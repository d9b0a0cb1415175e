// The resource lifecycle.
//
// An InfraResource is one piece of infrastructure. This controller keeps its finalizer, derives its
// phase from its claimRef the way the PV controller derives a PV's (syncVolume): no claimRef →
// Available; a claimRef naming a live claim with that UID → Bound; a claimRef naming a claim that
// is gone, being deleted, or has another UID → Released. Running Terraform for the resource, and
// reclaiming it, are the Lifecycle's job (resource_lifecycle.go); without one (Lifecycle nil) a
// resource has nothing to run and is Available as soon as it exists.
package controller

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// ResourceReconciler keeps InfraResources' finalizers, phases and reclaim.
type ResourceReconciler struct {
	client.Client
	Recorder events.EventRecorder
	// MaxConcurrentReconciles bounds parallel reconciles (1 when zero).
	MaxConcurrentReconciles int
}

// +kubebuilder:rbac:groups=conductor.io,resources=infraresources,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources/finalizers,verbs=update

// Reconcile syncs one resource.
func (r *ResourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, req.NamespacedName, res); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !res.DeletionTimestamp.IsZero() {
		if controllerutil.RemoveFinalizer(res, v1alpha1.FinalizerResource) {
			return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, res))
		}
		return ctrl.Result{}, nil
	}
	if controllerutil.AddFinalizer(res, v1alpha1.FinalizerResource) {
		if err := r.Update(ctx, res); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := res.DeepCopy()
	claimState, err := r.observeClaim(ctx, res)
	if err != nil {
		return ctrl.Result{}, err
	}
	res.Status.Phase = bindingPhase(res, claimState)
	if perr := r.Status().Patch(ctx, res, client.MergeFrom(before)); perr != nil && !apierrors.IsNotFound(perr) {
		err = errors.Join(err, perr)
	}
	return ctrl.Result{}, err
}

// claimState is what the resource controller observed of the claim a resource names.
type claimState int

const (
	claimNone    claimState = iota // no claimRef
	claimLive                      // the claim exists, with the claimRef's UID (or the claimRef has none)
	claimGone                      // not found, being deleted, or another UID
	claimWaiting                   // pre-bound by name to a claim that does not exist yet
)

func (r *ResourceReconciler) observeClaim(ctx context.Context, res *v1alpha1.InfraResource) (claimState, error) {
	ref := res.Spec.ClaimRef
	if ref == nil {
		return claimNone, nil
	}
	claim := &v1alpha1.InfraClaim{}
	err := r.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, claim)
	switch {
	case apierrors.IsNotFound(err) && ref.UID == "":
		return claimWaiting, nil
	case apierrors.IsNotFound(err):
		return claimGone, nil
	case err != nil:
		return claimNone, err
	case ref.UID != "" && claim.UID != ref.UID, !claim.DeletionTimestamp.IsZero():
		return claimGone, nil
	}
	return claimLive, nil
}

// bindingPhase is the phase a resource's claim gives it (mirrors syncVolume): Released is kept
// once reached, as a released PV is never bound again without an admin clearing its claimRef.
func bindingPhase(res *v1alpha1.InfraResource, claim claimState) v1alpha1.ResourcePhase {
	switch {
	case res.Status.Phase == v1alpha1.ResourceReleased && res.Spec.ClaimRef != nil:
		return v1alpha1.ResourceReleased
	case claim == claimNone, claim == claimWaiting:
		return v1alpha1.ResourceAvailable
	case claim == claimLive:
		return v1alpha1.ResourceBound
	default:
		return v1alpha1.ResourceReleased
	}
}

// SetupWithManager registers the controller: resources, and the claims they name.
func (r *ResourceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := setupIndexes(context.Background(), mgr); err != nil {
		return err
	}
	workers := r.MaxConcurrentReconciles
	if workers < 1 {
		workers = 1
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.InfraResource{}).
		Watches(&v1alpha1.InfraClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			claim := o.(*v1alpha1.InfraClaim)
			name := boundName(claim)
			if name == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("infraresource").
		Complete(r)
}
