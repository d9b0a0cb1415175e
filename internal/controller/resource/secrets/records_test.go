package secrets

import (
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func TestKeepRunLogOnlyWherePeopleNeedIt(t *testing.T) {
	res := func(op string, result v1alpha1.RunResult, drifted *bool) *v1alpha1.InfraResource {
		r := &v1alpha1.InfraResource{}
		r.Status.LastRun = &v1alpha1.RunStatus{Operation: op, Result: result}
		if drifted != nil {
			r.Status.Drift = &v1alpha1.DriftStatus{Drifted: *drifted}
		}
		return r
	}
	yes, no := true, false
	cases := []struct {
		name    string
		res     *v1alpha1.InfraResource
		keepAll bool
		want    bool
	}{
		{"a successful apply keeps only its summary", res("apply", v1alpha1.RunSucceeded, nil), false, false},
		{"a plan with no changes", res("plan", v1alpha1.RunSucceeded, nil), false, false},
		{"a failed apply", res("apply", v1alpha1.RunFailed, nil), false, true},
		{"variables that do not fit", res("plan", v1alpha1.RunInvalid, nil), false, true},
		{"a plan waiting for approval", res("plan", v1alpha1.RunWaitingForApproval, nil), false, true},
		{"a drift check that found drift", res("drift", v1alpha1.RunSucceeded, &yes), false, true},
		{"a drift check that found none", res("drift", v1alpha1.RunSucceeded, &no), false, false},
		{"--keep-run-logs keeps a successful apply's", res("apply", v1alpha1.RunSucceeded, nil), true, true},
	}
	for _, tc := range cases {
		if got := keepRunLog(tc.res, tc.keepAll); got != tc.want {
			t.Errorf("%s: keepRunLog = %v, want %v", tc.name, got, tc.want)
		}
	}
}
