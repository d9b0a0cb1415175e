package claim

// Deleted in reverse: a claim that other claims read is not released while they exist, nor while
// the resources they were bound to are being reclaimed, as Crossplane's Usage holds back the
// deletion of what is in use and kubernetes.io/pvc-protection that of a PVC a pod mounts. Deleting
// a namespace, or a whole graph at once, so releases the readers first: their resources are
// destroyed while what they read still exists.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// holdForReaders keeps a deleted claim (its finalizer) while claims read it or resources of
// claims that read it are not reclaimed yet: condition InUse True (InUseByDependents) names them,
// with an event when the list changes. It reports whether the claim is held. Nothing polls: a
// reader's deletion and its resource's wake the claim (relatedClaims, claimsForResource).
func (r *Reconciler) holdForReaders(ctx context.Context, claim *v1alpha1.InfraClaim) (bool, error) {
	if !controllerutil.ContainsFinalizer(claim, v1alpha1.FinalizerClaim) {
		return false, nil
	}
	waiting, err := r.liveReaders(ctx, claim)
	if err != nil || len(waiting) == 0 {
		return false, err
	}
	before := claim.DeepCopy()
	msg := "deletion waits for what reads this claim's outputs to be reclaimed first: " + listed(waiting, maxListed)
	prev := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionInUse)
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionInUse, metav1.ConditionTrue, v1alpha1.ReasonInUseByDependents, msg)
	if prev == nil || prev.Message != msg {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeNormal, v1alpha1.ReasonInUseByDependents, "Release", "%s", msg)
	}
	_, err = shared.PatchStatus(ctx, r.Client, claim, before)
	return true, client.IgnoreNotFound(err)
}

// liveReaders names what holds back the claim's release: "claim ns/name" for each claim that reads
// it (deleting or not; another namespace's only while a grant lets it read, as dependents lists
// them), and "resource name" for each resource whose claim read it that still holds infrastructure
// to reclaim (not a Released resource kept by reclaim policy Retain, which keeps its
// infrastructure by the platform's choice, nor one freed of its claim). A reader on a cycle through
// the claim that is being deleted too is not waited for: each would wait for the next.
func (r *Reconciler) liveReaders(ctx context.Context, claim *v1alpha1.InfraClaim) ([]string, error) {
	key := shared.UpstreamKey(claim.Namespace, claim.Name)
	// Claims on a cycle through this one, deleted with it, would each wait for the next: those
	// are not waited for (nor their resources), whatever the cycle's length.
	onCycle := map[string]bool{}
	cycle, err := r.findCycle(ctx, claim)
	if err != nil {
		return nil, err
	}
	for _, k := range cycle {
		onCycle[k] = true
	}
	readers, err := r.dependents(ctx, claim)
	if err != nil {
		return nil, err
	}
	var out []string
	skip := map[string]bool{}
	for _, d := range readers {
		k := shared.UpstreamKey(d.Namespace, d.Name)
		if onCycle[k] {
			live := &v1alpha1.InfraClaim{}
			if err := r.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: d.Name}, live); err == nil && !live.DeletionTimestamp.IsZero() {
				skip[k] = true
				continue
			}
		}
		out = append(out, "claim "+k)
		skip[k] = true // its resource is its claim's to hold
	}
	resources := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, resources, client.MatchingFields{shared.IndexResourceReadsFrom: key}); err != nil {
		return nil, err
	}
	for i := range resources.Items {
		res := &resources.Items[i]
		ref := res.Spec.ClaimRef
		if ref == nil || res.Status.Phase == v1alpha1.ResourceAvailable || skip[shared.UpstreamKey(ref.Namespace, ref.Name)] {
			// No claim any more (an admin freed it: it holds nothing it read), or its claim is
			// listed or on a cycle with this one.
			continue
		}
		if res.Spec.ReclaimPolicy == v1alpha1.ReclaimRetain && res.Status.Phase == v1alpha1.ResourceReleased {
			continue
		}
		out = append(out, fmt.Sprintf("resource %s (%s)", res.Name, phaseOr(res.Status.Phase, "reclaiming")))
	}
	slices.Sort(out)
	return out, nil
}

func phaseOr(p v1alpha1.ResourcePhase, def string) string {
	if p == "" {
		return def
	}
	return string(p)
}

// maxListed bounds the names a condition or event message lists (a condition message holds at
// most 32768 bytes, an event note 1 KiB).
const maxListed = 10

// listed joins names, at most max of them, and says how many more there are.
func listed(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" and %d more", len(names)-max)
}
