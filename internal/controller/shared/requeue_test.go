package shared

import (
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

func TestLowestNonZeroResult(t *testing.T) {
	after := func(d time.Duration) ctrl.Result { return ctrl.Result{RequeueAfter: d} }
	for _, c := range []struct {
		name       string
		i, j, want ctrl.Result
	}{
		{"both zero", ctrl.Result{}, ctrl.Result{}, ctrl.Result{}},
		{"zero yields to the second", ctrl.Result{}, after(time.Minute), after(time.Minute)},
		{"zero yields to the first", after(time.Minute), ctrl.Result{}, after(time.Minute)},
		{"the shorter wait, second", after(time.Minute), after(time.Second), after(time.Second)},
		{"the shorter wait, first", after(time.Second), after(time.Minute), after(time.Second)},
	} {
		if got := LowestNonZeroResult(c.i, c.j); got != c.want {
			t.Errorf("%s: LowestNonZeroResult(%v, %v) = %v, want %v", c.name, c.i, c.j, got, c.want)
		}
	}
}
