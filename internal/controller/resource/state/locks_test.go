package state

import (
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// The lock decisions that need no API server: which last runs are looked for a lock at all, which
// lock is the recorded dead run's own through the state server, and which lock status calls stale.
func TestLockDecisions(t *testing.T) {
	for result, want := range map[v1alpha1.RunResult]bool{
		v1alpha1.RunSucceeded: true, v1alpha1.RunWaitingForApproval: true, v1alpha1.RunInvalid: true,
		v1alpha1.RunRunning: false, v1alpha1.RunFailed: false,
	} {
		if got := endedOnItsOwn(&v1alpha1.RunStatus{Result: result}); got != want {
			t.Errorf("endedOnItsOwn(%s) = %v, want %v", result, got, want)
		}
	}

	const self = "conductor@pod"
	last := &v1alpha1.RunStatus{ID: "run-1", Who: self}
	byRun := &statebackend.Lock{ID: "l1", Info: "conductor-tf run run-1: apply"}
	cases := []struct {
		name  string
		lock  *statebackend.Lock
		last  *v1alpha1.RunStatus
		alive bool
		want  bool
	}{
		{"the recorded run's lock, the run dead", byRun, last, false, true},
		{"the recorded run's lock, the run alive", byRun, last, true, false},
		{"another run's lock", &statebackend.Lock{Info: "conductor-tf run run-2"}, last, false, false},
		{"a person's terraform (no run named)", &statebackend.Lock{Info: "", Who: self}, last, false, false},
		{"the run recorded by another deployment", byRun, &v1alpha1.RunStatus{ID: "run-1", Who: "other@pod"}, false, false},
		{"no run recorded", byRun, &v1alpha1.RunStatus{Who: self}, false, false},
	}
	for _, tc := range cases {
		if got := isRecordedRunLock(tc.lock, tc.last, tc.alive, self); got != tc.want {
			t.Errorf("%s: isRecordedRunLock = %v, want %v", tc.name, got, tc.want)
		}
	}

	k := New(Options{StaleLockAfter: time.Hour}) // the kubernetes backend: no run is alive here
	now := time.Now()
	for _, tc := range []struct {
		name string
		lock *statebackend.Lock
		want bool
	}{
		{"held for two hours", &statebackend.Lock{Created: now.Add(-2 * time.Hour)}, true},
		{"held for ten minutes", &statebackend.Lock{Created: now.Add(-10 * time.Minute)}, false},
		{"no creation time", &statebackend.Lock{}, false},
		{"no lock", nil, false},
	} {
		if got := k.isStale(tc.lock, now); got != tc.want {
			t.Errorf("%s: isStale = %v, want %v", tc.name, got, tc.want)
		}
	}
	if d := New(Options{}).staleLockAfter; d != DefaultStaleLockAfter {
		t.Errorf("stale lock after, unset: %s, want DefaultStaleLockAfter (%s)", d, DefaultStaleLockAfter)
	}
}
