package class

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// A class's new maxLifetime says, before any claim is deleted, how many claims it ends within the
// notice and which: the ones it bounds, not those whose own lifetime ends them nor other classes'.
func TestClaimsEndingCountsWhatANewMaximumEnds(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	now := time.Now()
	claim := func(name, class string, age time.Duration, own time.Duration) *v1alpha1.InfraClaim {
		c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a",
			CreationTimestamp: metav1.Time{Time: now.Add(-age)}}}
		c.Spec.ClassName = class
		c.Status.Phase = v1alpha1.ClaimBound
		if own > 0 {
			c.Spec.Lifetime = &metav1.Duration{Duration: own}
		}
		return c
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		claim("old-db", "db", 48*time.Hour, 0),                             // ended by the new maximum
		claim("older-db", "db", 90*24*time.Hour, 0),                        // likewise
		claim("young-db", "db", time.Hour, 0),                              // 23 h left
		claim("own-short", "db", 9*time.Hour+30*time.Minute, 10*time.Hour), // its own lifetime ends it
		claim("other", "cache", 48*time.Hour, 0),                           // another class
	).Build()
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Recorder: rec}
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
	class.Spec.MaxLifetime = &metav1.Duration{Duration: 24 * time.Hour}

	if _, err := r.observeEndings(context.Background(), class, now); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionClaimsEnding)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonMaxLifetimeEndsClaims {
		t.Fatalf("ClaimsEnding %+v, want True MaxLifetimeEndsClaims", cond)
	}
	if !strings.Contains(cond.Message, "ends 2 claim(s)") || !strings.Contains(cond.Message, "team-a/old-db, team-a/older-db") {
		t.Fatalf("message %q, want the two claims the maximum ends named", cond.Message)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, v1alpha1.ReasonMaxLifetimeEndsClaims) {
			t.Fatalf("event %q", e)
		}
	default:
		t.Fatal("no Warning event on the class")
	}

	// Raised far enough: none; removed: no condition.
	class.Spec.MaxLifetime.Duration = 365 * 24 * time.Hour
	if _, err := r.observeEndings(context.Background(), class, now); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionClaimsEnding); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Fatalf("ClaimsEnding %+v after raising maxLifetime, want False", cond)
	}
	class.Spec.MaxLifetime = nil
	if _, err := r.observeEndings(context.Background(), class, now); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionClaimsEnding); cond != nil {
		t.Fatalf("ClaimsEnding %+v without maxLifetime, want none", cond)
	}
}
