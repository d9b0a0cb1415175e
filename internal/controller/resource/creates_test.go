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
