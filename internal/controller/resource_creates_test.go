package controller

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// settleCreates clears the creates a run started only when a stored state holds them (issue 32).
func TestSettleCreatesOnlyOnceTheStateIsStored(t *testing.T) {
	crashed := &tfrunner.RunError{Op: "apply", Message: "Error: Plugin did not respond: The plugin encountered an error, and failed to respond to the plugin6.(*GRPCProvider).ApplyResourceChange call."}
	for _, c := range []struct {
		name   string
		mine   bool
		err    error
		stored bool
		kept   bool
	}{
		{"succeeded, stored", true, nil, true, false},
		{"failed on its own, stored", true, &tfrunner.RunError{Op: "apply", Message: "Error: quota"}, true, false},
		{"succeeded, state pending in the server", true, nil, false, true},
		{"errored state not kept", true, fmt.Errorf("%w: refused", tfrunner.ErrStateNotKept), true, true},
		{"outlived the grace period (SIGKILL)", true, fmt.Errorf("apply: %w", exec.ErrWaitDelay), true, true},
		{"lost", true, fmt.Errorf("lost: %w", tfrunner.ErrProcessLost), true, true},
		{"provider crashed mid-apply", true, crashed, true, true},
		{"an earlier run's, settled by a success", false, nil, true, false},
		{"an earlier run's, a failure", false, errors.New("x"), true, true},
		{"an earlier run's, success not stored", false, nil, false, true},
		{"cancelled", true, context.Canceled, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := &v1alpha1.InfraResource{}
			res.Status.LastRun = &v1alpha1.RunStatus{ID: "now"}
			res.Status.CreatesPending, res.Status.CreatesPendingRun = []string{"module.main.x.y"}, "earlier"
			if c.mine {
				res.Status.CreatesPendingRun = "now"
			}
			settleCreates(res, c.err, c.stored)
			if kept := len(res.Status.CreatesPending) > 0; kept != c.kept {
				t.Fatalf("creates in doubt kept = %v, want %v", kept, c.kept)
			}
		})
	}
}
