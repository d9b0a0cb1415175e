// Package readypool keeps each class's ready pool (spec.readyPool) filled: resources provisioned
// from the class before any claim asks, so that a claim of the class binds at once (the claim
// reconciler's bindFromPool) instead of waiting for an apply. The pool's members are the unbound
// resources labelled conductor.io/ready-pool=<class>; a bind removes the label, and this
// reconciler provisions the next. It mirrors a ReplicaSet's reconcile: count the members from the
// cache, create or delete the difference, write the counts to status.
package readypool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// Reconciler keeps InfraClasses' ready pools filled.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder

	// expect holds the creates and deletes the cache does not show yet (expectations.go).
	expect expectations
}

// +kubebuilder:rbac:groups=conductor.io,resources=infraclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=conductor.io,resources=infraclasses/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=conductor.io,resources=infraresources,verbs=get;list;watch;create;delete

// Reconcile fills, shrinks or empties one class's pool and records its counts in
// status.readyPool. A class that is gone, or whose pool size is 0, keeps no unbound member; a
// class that is not Ready gets no new member (its module or template is broken).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	class := &v1alpha1.InfraClass{}
	err := r.Get(ctx, req.NamespacedName, class)
	if apierrors.IsNotFound(err) {
		return shared.RequeueOnConflict(ctrl.Result{}, r.empty(ctx, req.Name))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	members, creating, err := r.members(ctx, class.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := 0
	if p := class.Spec.ReadyPool; p != nil && class.DeletionTimestamp.IsZero() {
		want = int(p.Size)
	}
	keep, surplus := split(class, members, want)
	var errs []error
	for i := range surplus {
		errs = append(errs, r.deleteMember(ctx, class.Name, &surplus[i]))
	}
	if missing := want - len(keep) - creating; missing > 0 && classReady(class) {
		for range missing {
			res, err := r.provision(ctx, class)
			if err != nil {
				errs = append(errs, err)
				break
			}
			keep = append(keep, *res)
		}
	}
	st := countOf(keep, want)
	if st != nil {
		st.Provisioning += int32(creating)
	}
	if err := r.writeCounts(ctx, class, st); client.IgnoreNotFound(err) != nil {
		errs = append(errs, err)
	}
	return shared.RequeueOnConflict(ctrl.Result{}, errors.Join(errs...))
}

// writeCounts sets status.readyPool to st with a JSON merge patch of that field alone (no
// resourceVersion), nothing when it holds st already. The class reconciler writes the rest of the
// class's status: a patch of the whole status from this reconciler's read (shared.PatchStatus,
// which also refreshes the health conditions) would put back the conditions of that read over a
// Ready the class reconciler wrote since.
func (r *Reconciler) writeCounts(ctx context.Context, class *v1alpha1.InfraClass, st *v1alpha1.ReadyPoolStatus) error {
	if equality.Semantic.DeepEqual(class.Status.ReadyPool, st) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"readyPool": st}})
	if err != nil {
		return err
	}
	return r.Status().Patch(ctx, class, client.RawPatch(types.MergePatchType, patch))
}

// members lists the class's pooled resources (label conductor.io/ready-pool=class) that no claim
// holds and that are not being deleted, from the cache, less the ones this reconciler deleted that
// the cache still shows; creating is how many it created that the cache does not show yet
// (expectations).
func (r *Reconciler) members(ctx context.Context, class string) (members []v1alpha1.InfraResource, creating int, err error) {
	list := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, list, client.MatchingLabels{v1alpha1.LabelReadyPool: v1alpha1.LabelValue(class)}); err != nil {
		return nil, 0, err
	}
	listed := map[string]bool{}
	for i := range list.Items {
		listed[list.Items[i].Name] = list.Items[i].DeletionTimestamp.IsZero()
	}
	creating, deleting := r.expect.pending(class, listed, time.Now())
	return slices.DeleteFunc(list.Items, func(res v1alpha1.InfraResource) bool {
		return res.Spec.ClaimRef != nil || !res.DeletionTimestamp.IsZero() || res.Spec.ClassRef == nil || res.Spec.ClassRef.Name != class ||
			deleting[res.Name]
	}), creating, nil
}

// deleteMember deletes a member the pool does not keep, conditioned on the UID and the
// resourceVersion the cache listed: a member a claim has just taken (takeFromPool's Update, a new
// resourceVersion) is never deleted; the conflict requeues the class, whose next read sees the
// claim's. A member already gone is no error.
func (r *Reconciler) deleteMember(ctx context.Context, class string, res *v1alpha1.InfraResource) error {
	uid, rv := res.UID, res.ResourceVersion
	err := r.Delete(ctx, res, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return err
	case err != nil:
		return fmt.Errorf("deleting pooled resource %s: %w", res.Name, err)
	}
	r.expect.deleted(class, res.Name)
	return nil
}

// split divides the members into those the pool keeps (at most want, of the class's current
// module: a member pinned to an older version could never be bound) and the surplus to delete,
// which takes the ones still provisioning first, then the newest.
func split(class *v1alpha1.InfraClass, members []v1alpha1.InfraResource, want int) (keep, surplus []v1alpha1.InfraResource) {
	for _, m := range members {
		if m.Spec.Module != class.Spec.Module {
			surplus = append(surplus, m)
			continue
		}
		keep = append(keep, m)
	}
	slices.SortStableFunc(keep, func(a, b v1alpha1.InfraResource) int {
		if ra, rb := isReady(&a), isReady(&b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	if len(keep) > want {
		surplus = append(surplus, keep[want:]...)
		keep = keep[:want]
	}
	return keep, surplus
}

// provision creates one pooled resource of the class (provision.PooledResourceFromClass) under a
// generated name.
func (r *Reconciler) provision(ctx context.Context, class *v1alpha1.InfraClass) (*v1alpha1.InfraResource, error) {
	res, err := provision.PooledResourceFromClass(class)
	if err != nil {
		r.Recorder.Eventf(class, nil, corev1.EventTypeWarning, v1alpha1.ReasonReadyPoolFailed, "Provision",
			"pooled resource not provisioned: %v", err)
		return nil, err
	}
	if err := r.Create(ctx, res); err != nil {
		return nil, fmt.Errorf("creating a pooled resource of class %s: %w", class.Name, err)
	}
	r.expect.created(class.Name, res.Name)
	return res, nil
}

// empty deletes the unbound members of a class that is gone, and forgets its expectations once
// none is left.
func (r *Reconciler) empty(ctx context.Context, class string) error {
	members, creating, err := r.members(ctx, class)
	if err != nil {
		return err
	}
	var errs []error
	for i := range members {
		errs = append(errs, r.deleteMember(ctx, class, &members[i]))
	}
	if len(members) == 0 && creating == 0 {
		r.expect.forget(class)
	}
	return errors.Join(errs...)
}

func isReady(res *v1alpha1.InfraResource) bool { return res.Status.Phase == v1alpha1.ResourceAvailable }

func classReady(class *v1alpha1.InfraClass) bool {
	return meta.IsStatusConditionTrue(class.Status.Conditions, v1alpha1.ConditionReady)
}

// countOf is status.readyPool for the kept members; nil when the class keeps no pool.
func countOf(keep []v1alpha1.InfraResource, want int) *v1alpha1.ReadyPoolStatus {
	if want == 0 && len(keep) == 0 {
		return nil
	}
	st := &v1alpha1.ReadyPoolStatus{}
	for i := range keep {
		if isReady(&keep[i]) {
			st.Ready++
		} else {
			st.Provisioning++
		}
	}
	return st
}

// SetupWithManager registers the reconciler: classes, and pooled resources (by their label) so
// that a bind, a deletion or a member becoming Available is counted at once.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.InfraClass{}).
		Watches(&v1alpha1.InfraResource{}, handler.EnqueueRequestsFromMapFunc(classOfMember)).
		Named("readypool").
		Complete(r)
}

// classOfMember maps a resource labelled conductor.io/ready-pool to its class (spec.classRef).
// An update maps the old object too: the bind that removes the label wakes the pool to refill.
func classOfMember(_ context.Context, o client.Object) []reconcile.Request {
	res, ok := o.(*v1alpha1.InfraResource)
	if !ok || res.Labels[v1alpha1.LabelReadyPool] == "" || res.Spec.ClassRef == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: res.Spec.ClassRef.Name}}}
}
