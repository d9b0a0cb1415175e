// Package sharing reclaims a sharing class's shared resources (spec.sharing): a shared resource
// whose last share is gone is deleted, and its reclaim policy applies as to any resource (Delete
// destroys it, Retain keeps it and orphans its state), as a ReadWriteMany volume is released once
// no claim mounts it. The claim reconciler makes shared resources and shares (claim/shares.go);
// this reconciler only ever deletes a shared resource, and only one that shows no share on the API
// server, at the resourceVersion that showed it, past the grace after its creation and its last
// join (docs/sharing.md, the failure model).
package sharing

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// DefaultGrace is how long a shared resource is kept with no share after its creation or a claim's
// last join (provision.SharedGrace): the time a claim has between marking its join and creating
// its share, and more than the time between two joins of a claim that waits for it.
const DefaultGrace = provision.SharedGrace

// Reconciler deletes shared resources whose last share is gone.
type Reconciler struct {
	client.Client
	// APIReader reads the shares and the shared resource from the API server (required: the cache
	// may not show a share just made).
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Grace is how long a shared resource with no share is kept after its creation or last join
	// (DefaultGrace when zero).
	Grace time.Duration
}

// +kubebuilder:rbac:groups=conductor.io,resources=infraresources,verbs=get;list;watch;delete

// Reconcile deletes one shared resource when it has no share, past the grace.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The cache answers most events (a run's status writes): only a shared resource idle past the
	// grace is read again from the API server, and its shares listed there.
	cached := &v1alpha1.InfraResource{}
	if err := r.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cached.Labels[v1alpha1.LabelSharedOf] == "" || !cached.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if wait := r.graceLeft(cached, time.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	res := &v1alpha1.InfraResource{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, res); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !res.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if wait := r.graceLeft(res, time.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil // a join the cache did not show yet
	}
	shares := &v1alpha1.InfraResourceList{}
	if err := r.APIReader.List(ctx, shares, client.MatchingLabels{v1alpha1.LabelShareOf: v1alpha1.LabelValue(res.Name)}); err != nil {
		return ctrl.Result{}, err
	}
	if len(shares.Items) > 0 {
		return ctrl.Result{}, nil // a share's deletion wakes it (sharedOf)
	}
	// Deleted only as it was when it showed no share: a claim's join since (the join annotation
	// it writes first) changes the resourceVersion, and the deletion fails.
	rv, uid := res.ResourceVersion, res.UID
	err := r.Delete(ctx, res, client.Preconditions{ResourceVersion: &rv, UID: &uid})
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: shared.RetryDelay()}, nil
	}
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonSharedReclaimed, "Reclaim",
		"the last share of shared resource %s is gone: deleted (reclaim policy %s)", res.Name, res.Spec.ReclaimPolicy)
	return ctrl.Result{}, nil
}

// graceLeft is how much of the grace is left at now since res's creation and its last join.
func (r *Reconciler) graceLeft(res *v1alpha1.InfraResource, now time.Time) time.Duration {
	grace := r.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	return grace - provision.SharedIdleFor(res, now)
}

// SetupWithManager watches shared resources, and shares (a share's change or deletion wakes its
// shared resource).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		return fmt.Errorf("sharing: an APIReader is required")
	}
	isShared := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[v1alpha1.LabelSharedOf] != "" })
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.InfraResource{}, builder.WithPredicates(isShared)).
		Watches(&v1alpha1.InfraResource{}, handler.EnqueueRequestsFromMapFunc(sharedOf)).
		Named("sharing").
		Complete(r)
}

// sharedOf is the shared resource a share is a place of.
func sharedOf(_ context.Context, o client.Object) []reconcile.Request {
	if of := o.GetLabels()[v1alpha1.LabelShareOf]; of != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: of}}}
	}
	return nil
}
