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
