package resource

import (
	"context"

	"github.com/Masterminds/semver/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// Upgrades: a resource stays pinned to the module version it was provisioned with (as a PV keeps
// the parameters of the StorageClass it came from); when its class moves to a newer version of the
// same module, the resource says so and the platform team upgrades it by setting spec.module.version.

// upgradeAutomatically moves a resource provisioned for a claim to the newer module version its
// class offers when the class's upgradePolicy is Automatic: spec.module.version becomes the class's,
// and the variables are rendered again from the class's template (written for that version).
// It reports whether it updated the resource, whose new generation then plans and applies through
// the approval gate. A claim that is gone, or a template that does not render, leaves the resource
// as it is (UpgradeAvailable stays True, and an event says why).
func (r *Reconciler) upgradeAutomatically(ctx context.Context, res *v1alpha1.InfraResource, class *v1alpha1.InfraClass) (bool, error) {
	if class == nil || res.Status.AvailableModuleVersion == "" || res.Spec.ClaimRef == nil ||
		class.Spec.UpgradePolicy != v1alpha1.UpgradeAutomatic || res.Annotations[v1alpha1.AnnotationProvisionedBy] == "" {
		// Only what the controller provisioned from the class is rendered again from it: a
		// static or discovered resource's variables describe what exists, not the template.
		return false, nil
	}
	claim := &v1alpha1.InfraClaim{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: res.Spec.ClaimRef.Namespace, Name: res.Spec.ClaimRef.Name}, claim); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if uid := res.Spec.ClaimRef.UID; uid != "" && uid != claim.UID {
		return false, nil // another claim of that name: not the one this resource was rendered for
	}
	if !equality.Semantic.DeepEqual(claim.Spec.Resources.Requests, res.Spec.Capacity) {
		// The claim asks for a size the resource has not accepted (a resize refused: shrink,
		// expansion not allowed, a class limit; or not yet rendered): an upgrade renders the
		// claim's requests and must not carry that size in.
		r.opts.Recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonRenderFailed, "Upgrade",
			"not upgraded to %s: claim %s/%s requests a size the resource has not accepted (see the claim's Resized condition)",
			class.Spec.Module.Version, claim.Namespace, claim.Name)
		return false, nil
	}
	if len(claim.Spec.ParametersFrom) > 0 && (!meta.IsStatusConditionTrue(claim.Status.Conditions, v1alpha1.ConditionInputsReady) ||
		claim.Status.Inputs == nil || claim.Status.Inputs.Digest != res.Annotations[v1alpha1.AnnotationInputsDigest]) {
		// The claim reads other claims and what it read is not what the resource was rendered
		// with (an upstream missing, or a new value the claim controller renders next): an upgrade
		// now would render values the resource has not been given; it waits for that render.
		return false, nil
	}
	secretInputs := res.Spec.VariablesFrom
	if len(claim.Spec.ParametersFrom) > 0 {
		// The sensitive inputs follow the new version's module (which may declare other variables).
		var err error
		if secretInputs, err = provision.VariablesFrom(claim, class); err != nil {
			r.opts.Recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonRenderFailed, "Upgrade",
				"not upgraded to %s: %v", class.Spec.Module.Version, err)
			return false, nil
		}
		secretInputs = append(secretInputs, provision.SharedInputs(res, class)...)
	}
	vars, ids, err := provision.RenderFor(claim, class, res)
	if err != nil {
		r.opts.Recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonRenderFailed, "Upgrade",
			"not upgraded to %s: the class's template does not render for claim %s/%s: %v", class.Spec.Module.Version, claim.Namespace, claim.Name, err)
		return false, nil
	}
	vars = provision.KeepSharedValues(vars, res, class)
	from := res.Spec.Module.Version
	res.Spec.Module = class.Spec.Module
	res.Spec.ModuleCredentials = class.Spec.ModuleCredentials.DeepCopy() // the new version's source may need the class's new ones
	res.Spec.Variables = vars
	res.Spec.ImportIdentities = ids
	res.Spec.VariablesFrom = secretInputs
	if err := r.Update(ctx, res); err != nil {
		return false, err
	}
	r.opts.Recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonUpgrading, "Upgrade",
		"upgradePolicy Automatic: module %s from %s to %s (class %s)", res.Spec.Module.Source, from, res.Spec.Module.Version, class.Name)
	return true, nil
}

// observeUpgrade records whether the resource's class offers a newer version of the resource's
// module: status.availableModuleVersion and the UpgradeAvailable condition. Versions compare as
// semantic versions (Masterminds/semver, a leading "v" allowed); a class on another source, a
// version that does not parse, or a class that is gone leaves the resource UpToDate. The class is
// read from the cache and returned (nil when gone); a resource without a classRef (static) gets no
// condition. The error is the read's other than NotFound: the reconcile is retried rather than
// run without the class (its plan rules).
func (r *Reconciler) observeUpgrade(ctx context.Context, res *v1alpha1.InfraResource) (*v1alpha1.InfraClass, error) {
	if res.Spec.ClassRef == nil {
		return nil, nil
	}
	class := &v1alpha1.InfraClass{}
	offered := ""
	if err := r.Get(ctx, types.NamespacedName{Name: res.Spec.ClassRef.Name}, class); apierrors.IsNotFound(err) {
		class = nil
	} else if err != nil {
		return nil, err
	} else {
		// A share is of its class's per-claim module: that view is its class.
		class = provision.ClassFor(res, class)
		if class.Spec.Module.Source == res.Spec.Module.Source && newer(class.Spec.Module.Version, res.Spec.Module.Version) {
			offered = class.Spec.Module.Version
		}
	}
	markUpgrade(res, class, offered)
	return class, nil
}

// newer reports whether version a is a greater semantic version than b; false when either does
// not parse.
func newer(a, b string) bool {
	va, err := semver.NewVersion(a)
	if err != nil {
		return false
	}
	vb, err := semver.NewVersion(b)
	if err != nil {
		return false
	}
	return va.GreaterThan(vb)
}

// resourcesOfClass lists, from the cache, the resources provisioned from a class.
func (r *Reconciler) resourcesOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	list := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, list, client.MatchingFields{shared.IndexResourceClass: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return reqs
}
