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
			c.Spec.Lifetime = &v1alpha1.Duration{Duration: own}
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
	class.Spec.MaxLifetime = &v1alpha1.Duration{Duration: 24 * time.Hour}

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

// Issue 65 item 5: a class whose maxLifetime the controller cannot read (stored before the CRD
// refused it) ends no claim and says so; an unreadable notice is the default one, said too.
func TestAnUnreadableMaxLifetimeEndsNoClaim(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	now := time.Now()
	old := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Name: "old-db", Namespace: "team-a",
		CreationTimestamp: metav1.Time{Time: now.Add(-90 * 24 * time.Hour)}}}
	old.Spec.ClassName = "db"
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(old).Build(), Recorder: rec}
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
	class.Spec.MaxLifetime = &v1alpha1.Duration{Unparsed: `"9999999h"`}

	wait, err := r.observeEndings(context.Background(), class, now)
	if err != nil || wait != 0 {
		t.Fatalf("observeEndings: %s, %v", wait, err)
	}
	cond := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionClaimsEnding)
	if cond == nil || cond.Status != metav1.ConditionUnknown || cond.Reason != v1alpha1.ReasonInvalidDuration ||
		!strings.Contains(cond.Message, `spec.maxLifetime: "9999999h"`) || !strings.Contains(cond.Message, "ends no claim") {
		t.Fatalf("ClaimsEnding %+v, want Unknown InvalidDuration naming the value", cond)
	}
	if e := <-rec.Events; !strings.Contains(e, v1alpha1.ReasonInvalidDuration) {
		t.Fatalf("event %q", e)
	}
	if _, err := r.observeEndings(context.Background(), class, now); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-rec.Events:
		t.Fatalf("a second event for the same problem: %q", e)
	default:
	}

	class.Spec.MaxLifetime = &v1alpha1.Duration{Duration: 24 * time.Hour}
	class.Spec.LifetimeNotice = &v1alpha1.Duration{Unparsed: `"99999999999h"`}
	if _, err := r.observeEndings(context.Background(), class, now); err != nil {
		t.Fatal(err)
	}
	cond = meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionClaimsEnding)
	if cond == nil || cond.Reason != v1alpha1.ReasonMaxLifetimeEndsClaims || !strings.Contains(cond.Message, "notice (1h0m0s)") ||
		!strings.Contains(cond.Message, "spec.lifetimeNotice") || !strings.Contains(cond.Message, "the default notice applies") {
		t.Fatalf("ClaimsEnding %+v, want the default notice and the unreadable one named", cond)
	}
}
