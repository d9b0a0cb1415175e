package class

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// endingRecheck is how often a class with a maxLifetime counts again the claims it ends (claims
// age; the class's generation does not change).
const endingRecheck = 10 * time.Minute

// namesShown bounds the claims ClaimsEnding names; the count is whole.
const namesShown = 10

// observeEndings sets the class's ClaimsEnding condition at now: how many claims of the class
// (spec.className) its maxLifetime ends within its lifetimeNotice — claims whose own
// spec.lifetime is not what ends them — named by namespace/name, with a Warning event when it
// turns True. A class's new or shorter maximum says so here before any claim is deleted: each
// claim is told (LifetimeEnding) and deleted no sooner than a whole notice after
// (provision.EndOf). It returns when to count again (0: the class has no maxLifetime). Errors:
// listing claims.
func (r *Reconciler) observeEndings(ctx context.Context, class *v1alpha1.InfraClass, now time.Time) (time.Duration, error) {
	if problem := class.Spec.MaxLifetime.Problem("spec.maxLifetime"); problem != "" {
		problem += "; it ends no claim meanwhile"
		if cond := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionClaimsEnding); cond == nil || cond.Reason != v1alpha1.ReasonInvalidDuration {
			r.Recorder.Eventf(class, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalidDuration, "Expire", "%s", problem)
		}
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionClaimsEnding, metav1.ConditionUnknown,
			v1alpha1.ReasonInvalidDuration, problem)
		return 0, nil
	}
	if class.Spec.MaxLifetime == nil || class.Spec.MaxLifetime.Duration <= 0 {
		meta.RemoveStatusCondition(&class.Status.Conditions, v1alpha1.ConditionClaimsEnding)
		return 0, nil
	}
	claims := &v1alpha1.InfraClaimList{}
	if err := r.List(ctx, claims); err != nil {
		return 0, fmt.Errorf("listing claims to count the ones maxLifetime ends: %w", err)
	}
	notice := provision.NoticeOf(class)
	var ending []string
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.Spec.ClassName != class.Name || !claim.DeletionTimestamp.IsZero() {
			continue
		}
		lifetime, _ := provision.LifetimeOf(claim, class)
		if lifetime == provision.ClaimLifetime(claim) {
			continue // its own lifetime ends it, not the class's maximum
		}
		if end, _ := provision.EndOf(claim, lifetime, notice, now); !end.After(now.Add(notice)) {
			ending = append(ending, claim.Namespace+"/"+claim.Name)
		}
	}
	if len(ending) == 0 {
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionClaimsEnding, metav1.ConditionFalse,
			v1alpha1.ReasonNoClaimsEnding, fmt.Sprintf("maxLifetime %s ends no claim of this class within its notice (%s)%s", class.Spec.MaxLifetime.Duration, notice, noticeProblem(class)))
		return endingRecheck, nil
	}
	sort.Strings(ending)
	shown := ending
	if len(shown) > namesShown {
		shown = append(shown[:namesShown:namesShown], fmt.Sprintf("and %d more", len(ending)-namesShown))
	}
	msg := fmt.Sprintf("maxLifetime %s ends %d claim(s) of this class within its notice (%s): %s; each says LifetimeEnding and is deleted "+
		"no sooner than a whole notice after it was told, its resource reclaimed by its reclaim policy; raise or remove maxLifetime to keep them",
		class.Spec.MaxLifetime.Duration, len(ending), notice, strings.Join(shown, ", ")) + noticeProblem(class)
	if !meta.IsStatusConditionTrue(class.Status.Conditions, v1alpha1.ConditionClaimsEnding) {
		r.Recorder.Eventf(class, nil, corev1.EventTypeWarning, v1alpha1.ReasonMaxLifetimeEndsClaims, "Expire", "%s", shared.Truncate(msg, 1024))
	}
	shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionClaimsEnding, metav1.ConditionTrue,
		v1alpha1.ReasonMaxLifetimeEndsClaims, shared.Truncate(msg, 1024))
	return endingRecheck, nil
}

// noticeProblem is "; " and what the controller cannot read of the class's lifetimeNotice
// (v1alpha1.Duration's Unparsed: stored before the CRD refused it), for ClaimsEnding's message;
// "" when it reads. An unread notice is the default one (provision.NoticeOf).
func noticeProblem(class *v1alpha1.InfraClass) string {
	if p := class.Spec.LifetimeNotice.Problem("spec.lifetimeNotice"); p != "" {
		return "; " + p + " (the default notice applies)"
	}
	return ""
}
