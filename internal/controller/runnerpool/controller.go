// Package runnerpool keeps each InfraRunnerPool's runner Deployment and ServiceAccount in the
// controller's namespace (deployment.go renders the Deployment: the runner's flags, the grants its
// runs get, the pool's volumes), and reports in status whether its runners are connected.
package runnerpool

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/runners"
)

// Reconciler keeps each InfraRunnerPool's Deployment of runners in the manager's
// namespace and reports its ready and connected runners.
type Reconciler struct {
	client.Client
	// Namespace is the manager's: the runners' Deployments, ServiceAccounts and CA live there.
	Namespace string
	// Image is the runners' image when a pool names none (the manager's own).
	Image   string
	Targets Targets
	// Connected returns the number of runners of a pool connected to the run protocol now.
	Connected func(pool string) int
}

// runnerPoolResync is how often a pool's status is refreshed (connected runners change without
// any object changing).
const runnerPoolResync = 15 * time.Second

// +kubebuilder:rbac:groups=conductor.io,resources=infrarunnerpools,verbs=get;list;watch
// +kubebuilder:rbac:groups=conductor.io,resources=infrarunnerpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=apps,namespace=conductor-system,resources=deployments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=conductor-system,resources=configmaps,verbs=get;create;update
// +kubebuilder:rbac:groups="",namespace=conductor-system,resources=pods,verbs=get
// +kubebuilder:rbac:groups="",namespace=conductor-system,resources=serviceaccounts,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create

// Reconcile makes the pool's Deployment (owned by the pool, so deleting the pool deletes it) and
// records its status: phases ensureDeployment, then recordStatus.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &v1alpha1.InfraRunnerPool{}
	if err := r.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if msg := refusedVolume(pool); msg != "" {
		// Nothing is made of a pool that would hand its runs a runner's own credentials.
		before := pool.DeepCopy()
		meta.SetStatusCondition(&pool.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonVolumeRefused, Message: msg, ObservedGeneration: pool.Generation})
		_, err := shared.PatchStatus(ctx, r.Client, pool, before)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.ensureServiceAccount(ctx, pool); err != nil {
		return ctrl.Result{}, err
	}
	dep, err := r.ensureDeployment(ctx, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: runnerPoolResync}, r.recordStatus(ctx, pool, dep)
}

// refusedVolume says why a volume of the pool may not be mounted ("" when all may): a projected
// ServiceAccount token for the API server (no audience: runner pods mount no API token) or for the
// run protocol (runners.Audience: the runner's own credential), which runs could read. Volumes
// are the pool's to name; the check is here, not in CEL, whose cost estimate for nested lists
// exceeds the API server's budget.
func refusedVolume(pool *v1alpha1.InfraRunnerPool) string {
	for _, v := range pool.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && (t.Audience == "" || t.Audience == runners.Audience) {
				return fmt.Sprintf("volume %s projects a ServiceAccount token for %s: runs would read a runner's own credential; "+
					"name an audience of the cloud's (e.g. sts.amazonaws.com)", v.Name, map[bool]string{true: "the API server", false: "the run protocol"}[t.Audience == ""])
			}
		}
	}
	return ""
}

// ensureServiceAccount creates the pool's own ServiceAccount, conductor-tf-runner-<pool> (owned by
// the pool, mounting no API token), when the pool names none: every pool has an identity of its
// own for the run protocol.
func (r *Reconciler) ensureServiceAccount(ctx context.Context, pool *v1alpha1.InfraRunnerPool) error {
	if pool.Spec.ServiceAccountName != "" {
		return nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: runners.PoolServiceAccount(pool), Namespace: r.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, sa, func() error {
		sa.AutomountServiceAccountToken = ptr.To(false)
		return controllerutil.SetControllerReference(pool, sa, r.Scheme())
	})
	if err != nil {
		return fmt.Errorf("runner ServiceAccount %s/%s: %w", sa.Namespace, sa.Name, err)
	}
	return nil
}

// ensureDeployment creates or updates the Deployment to what runnerDeployment says.
func (r *Reconciler) ensureDeployment(ctx context.Context, pool *v1alpha1.InfraRunnerPool) (*appsv1.Deployment, error) {
	want := runnerDeployment(pool, r.Namespace, r.Image, r.Targets)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		dep.Labels = want.Labels
		dep.Spec.Replicas = want.Spec.Replicas
		if dep.Spec.Selector == nil {
			dep.Spec.Selector = want.Spec.Selector
		}
		if !equality.Semantic.DeepDerivative(want.Spec.Template, dep.Spec.Template) {
			dep.Spec.Template = want.Spec.Template
		}
		return controllerutil.SetControllerReference(pool, dep, r.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("runner Deployment %s/%s: %w", want.Namespace, want.Name, err)
	}
	return dep, nil
}

// recordStatus writes ready and connected runners and the Ready condition.
func (r *Reconciler) recordStatus(ctx context.Context, pool *v1alpha1.InfraRunnerPool, dep *appsv1.Deployment) error {
	before := pool.DeepCopy()
	pool.Status.ObservedGeneration = pool.Generation
	pool.Status.ReadyReplicas = dep.Status.ReadyReplicas
	if r.Connected != nil {
		pool.Status.ConnectedRunners = int32(r.Connected(pool.Name))
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunnersConnected,
		Message: fmt.Sprintf("%d runner(s) connected", pool.Status.ConnectedRunners), ObservedGeneration: pool.Generation}
	others, err := runners.PoolsSharing(ctx, r.Client, pool)
	if err != nil {
		return err
	}
	switch {
	case len(others) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonServiceAccountShared
		cond.Message = fmt.Sprintf("ServiceAccount %s also serves pool(s) %s: the manager refuses these runners until each pool has an account of its own",
			runners.PoolServiceAccount(pool), strings.Join(others, ", "))
	case pool.Status.ConnectedRunners == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonNoRunners
		cond.Message = fmt.Sprintf("no runner is connected to %s; %d of %d pods ready; runs of this pool wait", r.Targets, dep.Status.ReadyReplicas, ptr.Deref(dep.Spec.Replicas, 0))
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
	_, err = shared.PatchStatus(ctx, r.Client, pool, before)
	return client.IgnoreNotFound(err)
}

// SetupWithManager registers the reconciler for pools and the Deployments they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.InfraRunnerPool{}).
		Owns(&appsv1.Deployment{}).
		Named("infrarunnerpool").
		Complete(r)
}
