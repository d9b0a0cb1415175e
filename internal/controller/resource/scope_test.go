package resource

import (
	"context"
	"errors"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// runPhases runs phases until one ends the reconcile or fails, and returns the soonest of their
// results: a phase after the end or a failure never runs (it could start a run the earlier phase
// must come before).
func TestRunPhasesEndsAndAggregates(t *testing.T) {
	after := func(d time.Duration) ctrl.Result { return ctrl.Result{RequeueAfter: d} }
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		phases  []func(s *resourceScope) (ctrl.Result, error)
		ran     int
		want    ctrl.Result
		wantErr error
	}{
		{"all run, the soonest result", []func(*resourceScope) (ctrl.Result, error){
			func(*resourceScope) (ctrl.Result, error) { return after(time.Minute), nil },
			func(*resourceScope) (ctrl.Result, error) { return ctrl.Result{}, nil },
			func(*resourceScope) (ctrl.Result, error) { return after(time.Second), nil },
		}, 3, after(time.Second), nil},
		{"an end stops the rest", []func(*resourceScope) (ctrl.Result, error){
			func(*resourceScope) (ctrl.Result, error) { return ctrl.Result{}, nil },
			func(s *resourceScope) (ctrl.Result, error) { return s.end(after(time.Hour)), nil },
			func(*resourceScope) (ctrl.Result, error) { return after(time.Second), nil },
		}, 2, after(time.Hour), nil},
		{"a failure stops the rest", []func(*resourceScope) (ctrl.Result, error){
			func(*resourceScope) (ctrl.Result, error) { return ctrl.Result{}, boom },
			func(*resourceScope) (ctrl.Result, error) { return after(time.Second), nil },
		}, 1, ctrl.Result{}, boom},
	} {
		ran := 0
		var phases []resourcePhase
		for _, p := range tc.phases {
			phases = append(phases, func(_ context.Context, s *resourceScope) (ctrl.Result, error) { ran++; return p(s) })
		}
		s := &resourceScope{gone: true} // close writes nothing
		got, err := runPhases(context.Background(), s, phases...)
		if ran != tc.ran || got != tc.want || !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: ran %d phases, result %v, error %v; want %d, %v, %v", tc.name, ran, got, err, tc.ran, tc.want, tc.wantErr)
		}
	}
}
