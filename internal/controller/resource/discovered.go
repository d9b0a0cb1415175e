package resource

// Discovered resources (issue 68): a class's discovery makes a resource for each object it lists
// (conductor.io/discovered-by), Available and never planned or applied until a claim binds it;
// its first run then imports the objects (spec.import) and its plan must only import
// (discoveryRules). One the last listing no longer found (conductor.io/discovery-lost) is Lost
// while unbound.

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// waitsForClaim reports whether res is a discovered resource that no claim holds and that was
// never applied: nothing runs for it.
func waitsForClaim(res *v1alpha1.InfraResource, binding v1alpha1.ResourcePhase) bool {
	return res.Labels[v1alpha1.LabelDiscoveredBy] != "" && !state.EverApplied(res) && binding == v1alpha1.ResourceAvailable
}

// discoveryLost reports whether the last listing of res's class no longer found its object.
func discoveryLost(res *v1alpha1.InfraResource) bool {
	return res.Annotations[v1alpha1.AnnotationDiscoveryLost] != ""
}

// awaitClaim ends the reconcile of a discovered resource that waits for a claim (waitsForClaim):
// no state is named and no run starts; Synced and Ready say why (Discovered, or CandidateLost).
func (p *provisioning) awaitClaim(_ context.Context, s *resourceScope) (ctrl.Result, error) {
	res := s.res
	if !waitsForClaim(res, s.phase) {
		return ctrl.Result{}, nil
	}
	reason, msg := v1alpha1.ReasonDiscovered, fmt.Sprintf("found by class %s's discovery (%s); nothing is planned or applied until a claim binds it, "+
		"and its first plan must then only import", res.Labels[v1alpha1.LabelDiscoveredBy], res.Annotations[v1alpha1.AnnotationDiscoveryID])
	if discoveryLost(res) {
		reason, msg = v1alpha1.ReasonCandidateLost, fmt.Sprintf("the last listing of class %s's discovery no longer found %s (since %s): no claim binds it",
			res.Labels[v1alpha1.LabelDiscoveredBy], res.Annotations[v1alpha1.AnnotationDiscoveryID], res.Annotations[v1alpha1.AnnotationDiscoveryLost])
	}
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionSynced, metav1.ConditionFalse, reason, msg)
	shared.SetCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	return s.end(ctrl.Result{}), nil
}
