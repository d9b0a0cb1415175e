package resource

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// settleCreates clears the creates a run started only when a stored state holds them (issue 32),
// and per address: only those whose apply ended with the provider's answer, unless the run
// succeeded (issue 46: an interrupted run — SIGINT at the drain deadline or on lost leadership —
// cleared them all, though a create cut off mid-way may have left a half-made object).
func TestSettleCreatesOnlyOnceTheStateIsStored(t *testing.T) {
	crashed := &tfrunner.RunError{Op: "apply", Message: "Error: Plugin did not respond: The plugin encountered an error, and failed to respond to the plugin6.(*GRPCProvider).ApplyResourceChange call."}
	quota := &tfrunner.RunError{Op: "apply", Message: "Error: quota"}
	const x, z = "module.main.x.y", "module.main.z.w"
	for _, c := range []struct {
		name   string
		mine   bool
		ended  []string
		err    error
		stored bool
		kept   []string
	}{
		{"succeeded, stored", true, []string{x, z}, nil, true, nil},
		{"failed on its own (the provider refused both), stored", true, []string{x, z}, quota, true, nil},
		{"failed on its own, one create cut off", true, []string{z}, quota, true, []string{x}},
		{"succeeded, state pending in the server", true, []string{x, z}, nil, false, []string{x, z}},
		{"errored state not kept", true, []string{x, z}, fmt.Errorf("%w: refused", tfrunner.ErrStateNotKept), true, []string{x, z}},
		{"outlived the grace period (SIGKILL)", true, nil, fmt.Errorf("apply: %w", exec.ErrWaitDelay), true, []string{x, z}},
		{"lost", true, nil, fmt.Errorf("lost: %w", tfrunner.ErrProcessLost), true, []string{x, z}},
		{"provider crashed mid-apply", true, []string{z}, crashed, true, []string{x, z}},
		{"an earlier run's, settled by a success", false, nil, nil, true, nil},
		{"an earlier run's, a failure", false, []string{x}, errors.New("x"), true, []string{x, z}},
		{"an earlier run's, success not stored", false, nil, nil, false, []string{x, z}},
		{"interrupted (SIGINT), both cut off", true, nil, context.Canceled, true, []string{x, z}},
		{"interrupted (SIGINT), one answered", true, []string{x}, context.Canceled, true, []string{z}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := &v1alpha1.InfraResource{}
			res.Status.LastRun = &v1alpha1.RunStatus{ID: "now"}
			res.Status.CreatesPending, res.Status.CreatesPendingRun = []string{x, z}, "earlier"
			if c.mine {
				res.Status.CreatesPendingRun = "now"
			}
			settleCreates(res, c.ended, c.err, c.stored)
			if !slices.Equal(res.Status.CreatesPending, c.kept) {
				t.Fatalf("creates in doubt kept = %v, want %v", res.Status.CreatesPending, c.kept)
			}
			if len(c.kept) == 0 && res.Status.CreatesPendingRun != "" {
				t.Errorf("createsPendingRun %q left with nothing in doubt", res.Status.CreatesPendingRun)
			}
		})
	}
}

// A dead run's lock recovered: only an apply may have created unrecorded, and the mark makes the
// next run stop between plan and apply with every create in doubt (the kind CI's c32, created
// twice: Terraform called the provider before the controller recorded apply_start).
func TestMarkUnrecordedAfterADeadApply(t *testing.T) {
	const x = "module.main.x.y"
	for _, c := range []struct {
		name        string
		op          string
		pending     []string
		pendingRun  string
		marked      bool
		wantPending []string
		wantRun     string
	}{
		{"an apply that recorded nothing", "apply", nil, "", true, []string{v1alpha1.CreatesUnrecorded}, "dead"},
		{"an apply that recorded a create", "apply", []string{x}, "dead", true, []string{x, v1alpha1.CreatesUnrecorded}, "dead"},
		{"an earlier dead run's list stays its own", "apply", []string{x}, "older", true, []string{x, v1alpha1.CreatesUnrecorded}, "older"},
		{"marked already", "apply", []string{v1alpha1.CreatesUnrecorded}, "dead", false, []string{v1alpha1.CreatesUnrecorded}, "dead"},
		{"a saved plan not past its gate", "plan", nil, "", false, nil, ""},
		{"a destroy", "destroy", nil, "", false, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := &v1alpha1.InfraResource{}
			res.Status.LastRun = &v1alpha1.RunStatus{ID: "dead", Operation: c.op, Result: v1alpha1.RunRunning}
			res.Status.CreatesPending, res.Status.CreatesPendingRun = slices.Clone(c.pending), c.pendingRun
			if got := markUnrecorded(res); got != c.marked {
				t.Errorf("marked %v, want %v", got, c.marked)
			}
			if !slices.Equal(res.Status.CreatesPending, c.wantPending) || res.Status.CreatesPendingRun != c.wantRun {
				t.Errorf("createsPending %v (run %q), want %v (run %q)", res.Status.CreatesPending, res.Status.CreatesPendingRun, c.wantPending, c.wantRun)
			}
			if !c.marked {
				return
			}
			// The next run: a saved plan, its gate holding every create in doubt.
			res.Status.LastRun = &v1alpha1.RunStatus{ID: "next", Operation: "plan"}
			if !needsSavedPlan(res) {
				t.Error("the next run does not stop between plan and apply")
			}
			if g := gateOf(res); !g.InDoubt("module.main.kubernetes_config_map_v1.ledger") {
				t.Errorf("the next gate (in doubt: %v) lets a create of the ledger through", g.CreatesInDoubt)
			}
		})
	}
}
