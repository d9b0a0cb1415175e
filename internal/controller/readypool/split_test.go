package readypool

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func member(name string, age time.Duration, phase v1alpha1.ResourcePhase, version string) v1alpha1.InfraResource {
	r := v1alpha1.InfraResource{}
	r.Name = name
	r.CreationTimestamp = metav1.NewTime(time.Unix(1_700_000_000, 0).Add(-age))
	r.Status.Phase = phase
	r.Spec.Module = v1alpha1.ModuleSource{Source: "git::https://example.org/m.git", Version: version}
	return r
}

func names(rs []v1alpha1.InfraResource) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// TestSplit: the pool keeps ready members first, then the oldest; members of another module
// version are always surplus.
func TestSplit(t *testing.T) {
	class := &v1alpha1.InfraClass{}
	class.Spec.Module = v1alpha1.ModuleSource{Source: "git::https://example.org/m.git", Version: "v2"}
	members := []v1alpha1.InfraResource{
		member("new-provisioning", time.Minute, v1alpha1.ResourceProvisioning, "v2"),
		member("old-ready", time.Hour, v1alpha1.ResourceAvailable, "v2"),
		member("old-version", 2*time.Hour, v1alpha1.ResourceAvailable, "v1"),
		member("young-ready", 2*time.Minute, v1alpha1.ResourceAvailable, "v2"),
	}
	for _, tc := range []struct {
		want          int
		keep, surplus []string
		status        *v1alpha1.ReadyPoolStatus
	}{
		{3, []string{"old-ready", "young-ready", "new-provisioning"}, []string{"old-version"}, &v1alpha1.ReadyPoolStatus{Ready: 2, Provisioning: 1}},
		{2, []string{"old-ready", "young-ready"}, []string{"old-version", "new-provisioning"}, &v1alpha1.ReadyPoolStatus{Ready: 2}},
		{0, []string{}, []string{"old-version", "old-ready", "young-ready", "new-provisioning"}, nil},
	} {
		keep, surplus := split(class, members, tc.want)
		if got := names(keep); !slices.Equal(got, tc.keep) {
			t.Errorf("want %d: keep %v, want %v", tc.want, got, tc.keep)
		}
		if got := names(surplus); !slices.Equal(got, tc.surplus) {
			t.Errorf("want %d: surplus %v, want %v", tc.want, got, tc.surplus)
		}
		st := countOf(keep, tc.want)
		if (st == nil) != (tc.status == nil) || (st != nil && *st != *tc.status) {
			t.Errorf("want %d: status %+v, want %+v", tc.want, st, tc.status)
		}
	}
}
