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
	msg := "deletion waits for what reads this claim's outputs to be reclaimed first: " + strings.Join(waiting, ", ")
	prev := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionInUse)
	shared.SetCondition(&claim.Status.Conditions, claim.Generation, v1alpha1.ConditionInUse, metav1.ConditionTrue, v1alpha1.ReasonInUseByDependents, msg)
	if prev == nil || prev.Message != msg {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeNormal, v1alpha1.ReasonInUseByDependents, "Release", "%s", msg)
	}
	_, err = shared.PatchStatus(ctx, r.Client, claim, before)
	return true, client.IgnoreNotFound(err)
}

// liveReaders names what holds back the claim's release: "claim ns/name" for each claim that reads
// it (deleting or not), and "resource name" for each resource whose claim read it that still holds
// infrastructure to reclaim (not a Released resource kept by reclaim policy Retain, which keeps its
// infrastructure by the platform's choice). A reader the claim reads too (a cycle of two, both
// deleted) is not waited for: each would wait for the other.
func (r *Reconciler) liveReaders(ctx context.Context, claim *v1alpha1.InfraClaim) ([]string, error) {
	key := shared.UpstreamKey(claim.Namespace, claim.Name)
	reads := map[string]bool{}
	for _, p := range claim.Spec.ParametersFrom {
		reads[upstreamKey(claim.Namespace, p).String()] = true
	}
	var out []string
	claims := &v1alpha1.InfraClaimList{}
	if err := r.List(ctx, claims, client.MatchingFields{shared.IndexClaimUpstreams: key}); err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for i := range claims.Items {
		d := &claims.Items[i]
		if d.UID == claim.UID || (reads[client.ObjectKeyFromObject(d).String()] && !d.DeletionTimestamp.IsZero()) {
			continue
		}
		out = append(out, "claim "+client.ObjectKeyFromObject(d).String())
		held[shared.UpstreamKey(d.Namespace, d.Name)] = true
	}
	resources := &v1alpha1.InfraResourceList{}
	if err := r.List(ctx, resources, client.MatchingFields{shared.IndexResourceReadsFrom: key}); err != nil {
		return nil, err
	}
	for i := range resources.Items {
		res := &resources.Items[i]
		if ref := res.Spec.ClaimRef; ref != nil && held[shared.UpstreamKey(ref.Namespace, ref.Name)] {
			continue // its claim is listed
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
