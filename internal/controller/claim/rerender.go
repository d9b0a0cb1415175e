package claim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// rerender renders a provisioned resource's variables and import identities again when its claim
// has a new generation (a changed parameter or request), so that the resource applies the change
// and its identities name the objects its variables now name. The module stays pinned; only
// variables and identities follow the claim. Resources not provisioned for this claim are left
// alone.
func (r *Reconciler) rerender(ctx context.Context, claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) error {
	gen := strconv.FormatInt(claim.Generation, 10)
	r.markParametersApplied(claim, res)
	if res.Spec.ClassRef == nil || res.Annotations[v1alpha1.AnnotationProvisionedBy] == "" ||
		(res.Annotations[v1alpha1.AnnotationRenderedGeneration] == gen && !inputsChanged(claim, res)) ||
		res.Spec.ClaimRef == nil || res.Spec.ClaimRef.UID != claim.UID {
		return nil
	}
	if c := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionInputsReady); c != nil && c.Status != metav1.ConditionTrue {
		// Claim Bound, an upstream missing, not Ready or in a cycle: the resource keeps what it
		// has (InputsReady says why); nothing is rendered until every value is there again.
		return nil
	}
	class := &v1alpha1.InfraClass{}
	if err := r.Get(ctx, types.NamespacedName{Name: res.Spec.ClassRef.Name}, class); err != nil {
		return client.IgnoreNotFound(err)
	}
	class = provision.ClassFor(res, class) // a share renders from the per-claim module's view
	if reason, msg := resizeCheck(claim.Spec.Resources.Requests, res.Spec.Capacity, class); reason != "" {
		if reason == v1alpha1.ReasonExpanded {
			// Growing counts against the class's limits and the namespace's budget, checked and
			// written under their lock.
			ns, err := r.namespaceOf(ctx, claim)
			if err != nil {
				return err
			}
			if bounded(class, ns) {
				release, _ := r.lockFor(claim, class, ns)
				defer release()
				classes := &v1alpha1.InfraClassList{}
				if err := r.List(ctx, classes); err != nil {
					return err
				}
				why, over, err := r.newCounting(claim, ns, classes.Items).overLimits(ctx, class)
				if err != nil {
					return err
				}
				if over != "" {
					reason, msg = why, "expansion refused: "+over
				}
			}
		}
		prev := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionResized)
		fresh := prev == nil || prev.Reason != reason || prev.ObservedGeneration != claim.Generation
		if reason == v1alpha1.ReasonExpanded {
			// Allowed: an event (the claim's status shows the new capacity once bound again).
			r.Recorder.Eventf(claim, res, corev1.EventTypeNormal, reason, "Resize", "%s", msg)
		} else {
			shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionResized, metav1.ConditionFalse, reason, msg)
			if fresh {
				r.Recorder.Eventf(claim, res, corev1.EventTypeWarning, reason, "Resize", "%s", msg)
			}
			return nil // refused: nothing of this generation reaches the resource, parameters included
		}
	}
	if class.Spec.Module != res.Spec.Module {
		// The class moved to another module version; its template is for that version's inputs,
		// not for the module this resource is pinned to.
		r.Recorder.Eventf(claim, res, corev1.EventTypeWarning, v1alpha1.ReasonRenderFailed, "Render",
			"variables not updated: class %s now uses %s@%s, resource %s is pinned to %s@%s", class.Name,
			class.Spec.Module.Source, class.Spec.Module.Version, res.Name, res.Spec.Module.Source, res.Spec.Module.Version)
		return nil
	}
	vars, ids, err := provision.RenderFor(claim, class, res)
	if err != nil {
		r.Recorder.Eventf(claim, res, corev1.EventTypeWarning, v1alpha1.ReasonRenderFailed, "Render", "variables not updated: %v", err)
		return nil
	}
	vars = provision.KeepSharedValues(vars, res, class) // a share keeps its shared resource's outputs
	from := res.Spec.VariablesFrom
	if reads := inputsChanged(claim, res) || res.Annotations[v1alpha1.AnnotationReadsFrom] != ""; reads {
		// A claim that reads (or read) other claims: its sensitive inputs follow what it reads now.
		if from, err = provision.VariablesFrom(claim, class); err != nil {
			r.Recorder.Eventf(claim, res, corev1.EventTypeWarning, v1alpha1.ReasonRenderFailed, "Render", "variables not updated: %v", err)
			return nil
		}
		from = append(from, provision.SharedInputs(res, class)...) // a share keeps what it reads of its shared resource
	}
	annotations := maps.Clone(res.Annotations)
	annotations[v1alpha1.AnnotationRenderedGeneration] = gen
	provision.SetInputAnnotations(annotations, claim)
	if equality.Semantic.DeepEqual(vars, res.Spec.Variables) && equality.Semantic.DeepEqual(ids, res.Spec.ImportIdentities) &&
		equality.Semantic.DeepEqual(claim.Spec.Resources.Requests, res.Spec.Capacity) &&
		equality.Semantic.DeepEqual(from, res.Spec.VariablesFrom) && !inputsChanged(claim, res) {
		// The new generation changes nothing the resource holds (binding wrote spec.resourceName,
		// say): no write.
		return nil
	}
	if inputsChanged(claim, res) && res.Annotations[v1alpha1.AnnotationInputsDigest] != "" {
		r.Recorder.Eventf(claim, res, corev1.EventTypeNormal, v1alpha1.ReasonInputsChanged, "Render",
			"a value read from %s changed: resource %s is rendered and planned again", provision.ReadsFrom(claim), res.Name)
	}
	updated := res.DeepCopy()
	updated.Spec.Variables = vars
	updated.Spec.ImportIdentities = ids
	updated.Spec.VariablesFrom = from
	updated.Spec.Capacity = claim.Spec.Resources.Requests.DeepCopy()
	updated.Annotations = annotations
	if err := r.Update(ctx, updated); err != nil {
		return fmt.Errorf("updating the variables of resource %s: %w", res.Name, err)
	}
	*res = *updated
	return nil
}

// inputsChanged reports whether what the claim reads (the upstreams, or the digest of the values)
// differs from what its resource was last rendered with (AnnotationReadsFrom,
// AnnotationInputsDigest). A claim that reads nothing and a resource that records nothing agree.
func inputsChanged(claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) bool {
	if res.Annotations[v1alpha1.AnnotationReadsFrom] != provision.ReadsFrom(claim) {
		return true
	}
	digest := ""
	if claim.Status.Inputs != nil && len(claim.Spec.ParametersFrom) > 0 {
		digest = claim.Status.Inputs.Digest
	}
	return res.Annotations[v1alpha1.AnnotationInputsDigest] != digest
}

// resizeCheck compares a bound claim's requests with its resource's capacity, as Kubernetes checks
// a bound PVC's new storage request (only growth, and only when the StorageClass allows volume
// expansion). It returns "" when no request changed; ReasonExpanded and what grew when the class
// allows it; ReasonShrinkNotSupported when a request went below the capacity or was removed; and
// ReasonExpansionNotAllowed when one grew and the class does not allow expansion.
func resizeCheck(requests, capacity v1alpha1.Quantities, class *v1alpha1.InfraClass) (reason, message string) {
	for _, name := range slices.Sorted(maps.Keys(capacity)) {
		if _, ok := requests[name]; !ok {
			// A request removed is a shrink too: the capacity would lose it, and with it what the
			// class's limits count.
			have := capacity[name]
			return v1alpha1.ReasonShrinkNotSupported, fmt.Sprintf("requests.%s was removed; the resource's capacity is %s: a claim cannot shrink", name, have.String())
		}
	}
	var grew []string
	for _, name := range slices.Sorted(maps.Keys(requests)) {
		want := requests[name]
		have, ok := capacity[name]
		switch {
		case ok && want.Cmp(have) < 0:
			return v1alpha1.ReasonShrinkNotSupported, fmt.Sprintf("requests.%s %s is below the resource's capacity %s: a claim cannot shrink", name, want.String(), have.String())
		case !ok:
			grew = append(grew, fmt.Sprintf("%s to %s", name, want.String()))
		case want.Cmp(have) > 0:
			grew = append(grew, fmt.Sprintf("%s %s to %s", name, have.String(), want.String()))
		}
	}
	switch {
	case len(grew) == 0:
		return "", ""
	case !class.Spec.AllowExpansion:
		return v1alpha1.ReasonExpansionNotAllowed, fmt.Sprintf("class %s does not allow expansion (allowExpansion): requests stay at the resource's capacity, nothing changed (asked: %s)", class.Name, strings.Join(grew, ", "))
	}
	return v1alpha1.ReasonExpanded, "capacity grows: " + strings.Join(grew, ", ")
}

// markParametersApplied says on a bound claim with parameters whose resource was not provisioned
// from a class (static, discovered, adopted: no conductor.io/provisioned-by) that its parameters
// do not reach the resource (ParametersApplied=False, ResourceNotFromClass, and a Warning event when
// that is new), since rerender renders only what the controller provisioned: such a resource's
// variables describe what exists, and are its own to change. It removes the condition otherwise.
func (r *Reconciler) markParametersApplied(claim *v1alpha1.InfraClaim, res *v1alpha1.InfraResource) {
	if res.Annotations[v1alpha1.AnnotationProvisionedBy] != "" || len(claim.Spec.Parameters) == 0 ||
		res.Spec.ClaimRef == nil || res.Spec.ClaimRef.UID != claim.UID {
		meta.RemoveStatusCondition(&claim.Status.Conditions, v1alpha1.ConditionParametersApplied)
		return
	}
	msg := fmt.Sprintf("the claim's parameters do not reach resource %s: it was not provisioned from a class (a static, discovered or adopted resource), "+
		"so its spec.variables are its own; change them on the resource (kubectl edit infraresource %s), or claim a class to have parameters rendered", res.Name, res.Name)
	prev := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionParametersApplied)
	if prev == nil || prev.Reason != v1alpha1.ReasonResourceNotFromClass {
		r.Recorder.Eventf(claim, res, corev1.EventTypeWarning, v1alpha1.ReasonResourceNotFromClass, "Render", "%s", msg)
	}
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionParametersApplied, metav1.ConditionFalse, v1alpha1.ReasonResourceNotFromClass, msg)
}
