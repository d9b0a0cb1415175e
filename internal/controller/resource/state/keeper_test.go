package state

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// TestStateNameIsKept: a resource's state suffix is the one recorded in status.state.secretName,
// never derived again from its name (issue 17: a resource made before the collision-free names,
// whose state is tfstate-default-x-1-s, keeps it).
func TestStateNameIsKept(t *testing.T) {
	res := &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: "x-1"}}
	if got := Suffix(res); got != "" {
		t.Errorf("suffix of a resource with no state name recorded = %q, want none", got)
	}
	res.Status.State = &v1alpha1.StateStatus{SecretName: "tfstate-default-x-1-s"}
	if got := Suffix(res); got != "x-1-s" {
		t.Errorf("suffix = %q, want the recorded x-1-s", got)
	}
	k := &Keeper{}
	if changed, err := k.ChooseName(t.Context(), res); err != nil || changed || Suffix(res) != "x-1-s" {
		t.Errorf("ChooseName on a recorded name: changed=%v err=%v suffix=%q; want it kept", changed, err, Suffix(res))
	}
}
