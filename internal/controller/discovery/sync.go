package discovery

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// syncCandidates makes the listing's candidates resources of class: a resource for each that has
// none, the spec of an unbound, never applied one brought to what the listing now says, the lost
// mark removed from one found again and set on one not found (an event each). A resource a claim
// holds, or that was applied, is never changed, and none is ever deleted here. Reads are from the
// cache; a create that finds the name taken is left for the next listing (AlreadyExists).
func (r *Reconciler) syncCandidates(ctx context.Context, class *v1alpha1.InfraClass, candidates []Candidate) error {
	existing, err := r.discovered(ctx, class.Name)
	if err != nil {
		return err
	}
	listed := make(map[string]bool, len(candidates))
	for _, c := range candidates {
		want := desired(class, c)
		listed[want.Name] = true
		have, ok := existing[want.Name]
		if !ok {
			if err := r.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		}
		if err := r.refresh(ctx, have, want); err != nil {
			return err
		}
	}
	for name, res := range existing {
		if listed[name] || res.Annotations[v1alpha1.AnnotationDiscoveryLost] != "" {
			continue
		}
		patch := client.MergeFromWithOptions(res.DeepCopy(), client.MergeFromWithOptimisticLock{})
		res.Annotations[v1alpha1.AnnotationDiscoveryLost] = r.Now().UTC().Format(time.RFC3339)
		if err := r.Patch(ctx, res, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
		r.Recorder.Eventf(res, class, corev1.EventTypeWarning, v1alpha1.ReasonCandidateLost, "Discover",
			"class %s's listing no longer finds %s%s", class.Name, res.Annotations[v1alpha1.AnnotationDiscoveryID], lostConsequence(res))
	}
	return nil
}

// lostConsequence says what a lost candidate's resource becomes.
func lostConsequence(res *v1alpha1.InfraResource) string {
	if res.Spec.ClaimRef != nil || res.Status.ObservedGeneration > 0 {
		return ": the resource is in use and stays as it is (discovery never deletes)"
	}
	return ": the resource is Lost, and no claim binds it until a listing finds the object again"
}

// refresh brings a discovered resource found again to the listing: the lost mark removed, and,
// while unbound and never applied, the spec (the class's module; the listing's variables, imports,
// capacity, capabilities).
func (r *Reconciler) refresh(ctx context.Context, have, want *v1alpha1.InfraResource) error {
	// With the resourceVersion read: a claim that bound it since (a newer object) makes the patch
	// conflict, and the next reconcile sees the bind.
	patch := client.MergeFromWithOptions(have.DeepCopy(), client.MergeFromWithOptimisticLock{})
	changed := false
	if _, lost := have.Annotations[v1alpha1.AnnotationDiscoveryLost]; lost {
		delete(have.Annotations, v1alpha1.AnnotationDiscoveryLost)
		changed = true
	}
	if have.Spec.ClaimRef == nil && have.Status.ObservedGeneration == 0 && have.DeletionTimestamp.IsZero() {
		w := want.Spec
		if have.Spec.Module != w.Module || !equality.Semantic.DeepEqual(have.Spec.Variables, w.Variables) || !equality.Semantic.DeepEqual(have.Spec.Import, w.Import) ||
			!equality.Semantic.DeepEqual(have.Spec.Capacity, w.Capacity) || !equality.Semantic.DeepEqual(have.Spec.Capabilities, w.Capabilities) {
			have.Spec.Module, have.Spec.Variables, have.Spec.Import, have.Spec.ImportIdentities = w.Module, w.Variables, w.Import, w.ImportIdentities
			have.Spec.Capacity, have.Spec.Capabilities = w.Capacity, w.Capabilities
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return client.IgnoreNotFound(r.Patch(ctx, have, patch))
}

// discovered are the resources class's discovery made, by name (from the cache).
func (r *Reconciler) discovered(ctx context.Context, class string) (map[string]*v1alpha1.InfraResource, error) {
	list := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, list, client.MatchingLabels{v1alpha1.LabelDiscoveredBy: v1alpha1.LabelValue(class)}); err != nil {
		return nil, err
	}
	out := make(map[string]*v1alpha1.InfraResource, len(list.Items))
	for i := range list.Items {
		res := &list.Items[i]
		if res.Spec.ClassRef != nil && res.Spec.ClassRef.Name == class {
			if res.Annotations == nil {
				res.Annotations = map[string]string{}
			}
			out[res.Name] = res
		}
	}
	return out, nil
}

// count sets status's Available, Bound and Lost from the class's discovered resources.
func (r *Reconciler) count(ctx context.Context, class string, status *v1alpha1.DiscoveryStatus) error {
	existing, err := r.discovered(ctx, class)
	if err != nil {
		return err
	}
	status.Available, status.Bound, status.Lost = 0, 0, 0
	for _, res := range existing {
		switch {
		case res.Spec.ClaimRef != nil:
			status.Bound++
		case res.Annotations[v1alpha1.AnnotationDiscoveryLost] != "":
			status.Lost++
		case res.Status.Phase == v1alpha1.ResourceAvailable:
			status.Available++
		}
	}
	return nil
}
