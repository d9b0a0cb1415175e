package provision

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// EndOf never ends a claim sooner than a whole notice after it was told of an earlier end, and
// keeps a new claim's own end (issue 65 item 4).
func TestEndOfHoldsAnEarlierEndAWholeNotice(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	created := now.Add(-48 * time.Hour)
	claim := func(phase v1alpha1.ClaimPhase, told *time.Time, endingSince *time.Time) *v1alpha1.InfraClaim {
		c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.Time{Time: created}}}
		c.Status.Phase = phase
		if told != nil {
			c.Status.ExpiresAt = &metav1.Time{Time: *told}
		}
		if endingSince != nil {
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionLifetimeEnding, Status: metav1.ConditionTrue,
				LastTransitionTime: metav1.Time{Time: *endingSince}}}
		}
		return c
	}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		name     string
		claim    *v1alpha1.InfraClaim
		lifetime time.Duration
		want     time.Time
		held     bool
	}{
		{"a new claim: its own end, even within the notice", claim("", nil, nil), 48*time.Hour + time.Second, now.Add(time.Second), false},
		{"an old claim given a maximum it outlived: a notice from now", claim(v1alpha1.ClaimBound, nil, nil), 24 * time.Hour, now.Add(time.Hour), true},
		{"an old claim given a maximum far ahead: that end", claim(v1alpha1.ClaimBound, nil, nil), 96 * time.Hour, created.Add(96 * time.Hour), false},
		{"told an end, then a shorter maximum: a notice from now", claim(v1alpha1.ClaimBound, at(30*24*time.Hour), nil), 24 * time.Hour, now.Add(time.Hour), true},
		{"held since 20 minutes ago: where it was told", claim(v1alpha1.ClaimBound, at(40*time.Minute), at(-20*time.Minute)), 24 * time.Hour, now.Add(40 * time.Minute), true},
		{"held for a whole notice: now", claim(v1alpha1.ClaimBound, at(0), at(-time.Hour)), 24 * time.Hour, now, true},
		{"an extension: the later end", claim(v1alpha1.ClaimBound, at(time.Hour), at(-5*time.Minute)), 72 * time.Hour, created.Add(72 * time.Hour), false},
	} {
		got, held := EndOf(tc.claim, tc.lifetime, time.Hour, now)
		if !got.Equal(tc.want) || held != tc.held {
			t.Errorf("%s: end %s held %v, want %s held %v", tc.name, got, held, tc.want, tc.held)
		}
	}
}
