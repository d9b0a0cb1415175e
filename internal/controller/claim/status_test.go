package claim

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func TestClaimStatus(t *testing.T) {
	res := func(ready *metav1.Condition) *v1alpha1.InfraResource {
		r := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "r1"},
			Spec: v1alpha1.InfraResourceSpec{Capacity: v1alpha1.Quantities{"storage": resource.MustParse("8Gi")}}}
		if ready != nil {
			r.Status.Conditions = []metav1.Condition{*ready}
		}
		return r
	}
	cases := []struct {
		reason                string
		set                   func(*v1alpha1.InfraClaim)
		phase                 v1alpha1.ClaimPhase
		bound, ready          metav1.ConditionStatus
		readyReason, resource string
	}{
		{"bound to a resource that has not reported readiness: Ready is Unknown",
			func(c *v1alpha1.InfraClaim) { setBound(c, res(nil)) },
			v1alpha1.ClaimBound, metav1.ConditionTrue, metav1.ConditionUnknown, v1alpha1.ReasonResourceNotReady, "r1"},
		{"bound to a Ready resource: Ready mirrors it",
			func(c *v1alpha1.InfraClaim) {
				setBound(c, res(&metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied}))
			},
			v1alpha1.ClaimBound, metav1.ConditionTrue, metav1.ConditionTrue, v1alpha1.ReasonApplied, "r1"},
		{"bound to a failing resource: Ready mirrors its failure",
			func(c *v1alpha1.InfraClaim) {
				setBound(c, res(&metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonApplyFailed}))
			},
			v1alpha1.ClaimBound, metav1.ConditionTrue, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, "r1"},
		{"pending after having been bound: resource name and capacity are cleared",
			func(c *v1alpha1.InfraClaim) {
				setBound(c, res(nil))
				setPending(c, v1alpha1.ReasonNoMatchingResource, "none")
			},
			v1alpha1.ClaimPending, metav1.ConditionFalse, metav1.ConditionFalse, v1alpha1.ReasonNoMatchingResource, ""},
		{"lost keeps the resource name it lost",
			func(c *v1alpha1.InfraClaim) {
				setBound(c, res(nil))
				setLost(c, "gone")
			},
			v1alpha1.ClaimLost, metav1.ConditionFalse, metav1.ConditionFalse, v1alpha1.ReasonResourceLost, "r1"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			tc.set(c)
			bound := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionBound)
			ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
			if c.Status.Phase != tc.phase || bound.Status != tc.bound || ready.Status != tc.ready ||
				ready.Reason != tc.readyReason || c.Status.ResourceName != tc.resource || ready.ObservedGeneration != 3 {
				t.Errorf("phase %s, bound %s, ready %s/%s (gen %d), resource %q", c.Status.Phase, bound.Status,
					ready.Status, ready.Reason, ready.ObservedGeneration, c.Status.ResourceName)
			}
		})
	}
}

// TestResizeCheckRefusesARemovedRequest: a bound claim that drops a request shrinks its resource's
// capacity as surely as one that lowers it (issue 46: dropping requests.storage passed as "no
// change", the capacity lost storage, and the class's maxStoragePerNamespace stopped counting it).
func TestResizeCheckRefusesARemovedRequest(t *testing.T) {
	class := &v1alpha1.InfraClass{Spec: v1alpha1.InfraClassSpec{AllowExpansion: true}}
	capacity := v1alpha1.Quantities{"storage": resource.MustParse("5Gi")}
	for _, requests := range []v1alpha1.Quantities{nil, {}, {"iops": resource.MustParse("3000")}} {
		reason, msg := resizeCheck(requests, capacity, class)
		if reason != v1alpha1.ReasonShrinkNotSupported || !strings.Contains(msg, "requests.storage was removed") {
			t.Errorf("requests %v: %q %q, want ShrinkNotSupported", requests, reason, msg)
		}
	}
	if reason, _ := resizeCheck(v1alpha1.Quantities{"storage": resource.MustParse("5Gi")}, capacity, class); reason != "" {
		t.Errorf("unchanged requests: %q", reason)
	}
}

// TestClaimOfAPoolMemberIsReadyOnceItsParametersAreApplied: a claim that took a ready pool's
// member, applied (Ready True) with the pool's parameters, is not Ready while its own rendering
// (the resource's generation) waits to be applied; once status.observedGeneration reaches it, it
// mirrors the resource's Ready. A resource not taken from a pool mirrors Ready during a change,
// as before (its infrastructure was applied for this claim). Before, every claim mirrored Ready.
func TestClaimOfAPoolMemberIsReadyOnceItsParametersAreApplied(t *testing.T) {
	member := func(taken bool, generation, applied int64) *v1alpha1.InfraResource {
		r := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "m1", Generation: generation, Annotations: map[string]string{}},
			Status: v1alpha1.InfraResourceStatus{ObservedGeneration: applied, Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied, ObservedGeneration: generation}}}}
		if taken {
			r.Annotations[v1alpha1.AnnotationTakenFromPool] = "uid-1"
		}
		return r
	}
	for _, tc := range []struct {
		name   string
		res    *v1alpha1.InfraResource
		status metav1.ConditionStatus
		reason string
	}{
		{"taken, the claim's rendering not applied", member(true, 3, 1), metav1.ConditionFalse, v1alpha1.ReasonApplyingClaimParameters},
		{"taken, the claim's rendering applied", member(true, 3, 3), metav1.ConditionTrue, v1alpha1.ReasonApplied},
		{"not from a pool, a change applying", member(false, 3, 2), metav1.ConditionTrue, v1alpha1.ReasonApplied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			setBound(c, tc.res)
			ready := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady)
			if ready.Status != tc.status || ready.Reason != tc.reason {
				t.Errorf("Ready %s/%s (%s), want %s/%s", ready.Status, ready.Reason, ready.Message, tc.status, tc.reason)
			}
		})
	}
}
