package provision

// Lifetimes, as pure functions of a claim and its class: how long a claim lives (spec.lifetime
// bounded by the class's maxLifetime), how long before its end it is told (lifetimeNotice), and
// when it ends. The claim reconciler applies them (deletes a claim at its end), the class
// reconciler counts the claims a new maximum would end.

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// DefaultLifetimeNotice is how long before a claim's end LifetimeEnding comes, when its class sets
// no lifetimeNotice.
const DefaultLifetimeNotice = time.Hour

// LifetimeOf is a claim's lifetime: spec.lifetime bounded by the class's maxLifetime (class nil:
// no bound); 0 when it has none. bounded says the class's maximum cut it.
func LifetimeOf(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass) (lifetime time.Duration, bounded bool) {
	if claim.Spec.Lifetime != nil {
		lifetime = claim.Spec.Lifetime.Duration
	}
	if class != nil && class.Spec.MaxLifetime != nil && class.Spec.MaxLifetime.Duration > 0 {
		if bound := class.Spec.MaxLifetime.Duration; lifetime <= 0 || lifetime > bound {
			return bound, claim.Spec.Lifetime != nil
		}
	}
	return max(lifetime, 0), false
}

// NoticeOf is how long before the end a claim of class is told: its lifetimeNotice, else
// DefaultLifetimeNotice.
func NoticeOf(class *v1alpha1.InfraClass) time.Duration {
	if class != nil && class.Spec.LifetimeNotice != nil && class.Spec.LifetimeNotice.Duration > 0 {
		return class.Spec.LifetimeNotice.Duration
	}
	return DefaultLifetimeNotice
}

// ClaimLifetime is the claim's own spec.lifetime (0: none).
func ClaimLifetime(claim *v1alpha1.InfraClaim) time.Duration {
	if claim.Spec.Lifetime == nil {
		return 0
	}
	return claim.Spec.Lifetime.Duration
}

// EndOf is when a claim of lifetime ends, seen at now with the class's notice: its creation plus
// lifetime, unless that is earlier than what the claim was told before (status.expiresAt, or no
// end at all on a claim already reconciled: a class's new maxLifetime); then never sooner than a
// whole notice after it is told the earlier end (the moment LifetimeEnding turned True, else now),
// and held reports that. A new claim's first end is its own (spec.lifetime and the class's
// maxLifetime were both there to read when it was made), even if shorter than the notice. The end
// persists in status.expiresAt and LifetimeEnding's lastTransitionTime, so it stays put across
// reconciles and replicas.
func EndOf(claim *v1alpha1.InfraClaim, lifetime, notice time.Duration, now time.Time) (end time.Time, held bool) {
	end = claim.CreationTimestamp.Add(lifetime)
	told := claim.Status.ExpiresAt
	switch {
	case told != nil && !end.Before(told.Time):
		return end, false // as told, or later (an extension)
	case told == nil && claim.Status.Phase == "":
		return end, false // the claim's first reconcile: what it was made with
	}
	from := now
	if c := meta.FindStatusCondition(claim.Status.Conditions, v1alpha1.ConditionLifetimeEnding); c != nil && c.Status == metav1.ConditionTrue {
		from = c.LastTransitionTime.Time
	}
	if floor := from.Add(notice); end.Before(floor) {
		return floor, true
	}
	return end, false
}
