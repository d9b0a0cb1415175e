package controller

// Interrupted creates: crossplane-runtime's create-pending protocol (managed reconciler,
// meta.SetExternalCreatePending / ExternalCreateIncomplete), for Terraform.
//
// Terraform cannot know whether a create that a dead process started happened: the object may
// exist while no saved state says so, and the next plan would create it again beside the first.
// So, while an apply streams, each address whose create starts (apply_start) is written to
// status.createsPending before the next event is read; the list is cleared when the apply's
// process ends on its own (having saved its state). A list that is still there when the next run
// begins was left by a run that died; that run's plan is saved, and if it would create any of those
// addresses again it waits for approval with reason InterruptedCreate (unless interruptedCreates is
// Retry), naming the addresses, so that an operator can look for a duplicate, import it
// (spec.import), or approve the plan. Creates that never started are never held.

import (
	"errors"
	"slices"
	"strings"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// WaitInterruptedCreate is the pendingPlan reason of a plan that would create again what a dead
// run may have created.
const WaitInterruptedCreate = v1alpha1.ReasonInterruptedCreate

// createStarted records the tfrunner.CreateStarted event of address in status.createsPending (the
// caller checkpoints before the apply reads on); false when it is recorded already.
func createStarted(res *v1alpha1.InfraResource, address string) bool {
	if slices.Contains(res.Status.CreatesPending, address) && res.Status.CreatesPendingRun == runID(res) {
		return false
	}
	if res.Status.CreatesPendingRun != runID(res) {
		// Creates an earlier dead run left were settled by the gate before this apply began.
		res.Status.CreatesPending = nil
	}
	res.Status.CreatesPending = append(res.Status.CreatesPending, address)
	res.Status.CreatesPendingRun = runID(res)
	return true
}

// settleCreates clears status.createsPending after an apply whose process ended on its own and
// whose state is stored (stored: the state server holds no state of it that waits to be written,
// and its errored.tfstate, if any, was kept): that state holds every object it created. After a
// killed process, a provider that crashed mid-apply (tfrunner.Killed), or a state not stored yet,
// the list stays for the next run's gate, which runs once the state is written back.
//
// A successful run also settles the creates an earlier dead run left: its plan passed the gate
// (so it did not create them again, or was approved) or had no changes at all.
func settleCreates(res *v1alpha1.InfraResource, runErr error, stored bool) {
	mine := res.Status.CreatesPendingRun == runID(res)
	stored = stored && !errors.Is(runErr, tfrunner.ErrStateNotKept)
	if (mine && stored && !tfrunner.Killed(runErr)) || (!mine && stored && runErr == nil) {
		res.Status.CreatesPending, res.Status.CreatesPendingRun = nil, ""
	}
}

// holdsCreates reports whether the resource must stop between plan and apply because a dead run
// left creates in doubt (and the policy is Hold).
func holdsCreates(res *v1alpha1.InfraResource) bool {
	return len(res.Status.CreatesPending) > 0 && res.Spec.InterruptedCreates != v1alpha1.InterruptedCreatesRetry
}

// interruptedMessage explains a held plan.
func interruptedMessage(addresses []string) string {
	return "a run that died had started creating " + strings.Join(addresses, ", ") +
		" and may have created them; this plan would create them again. Look for a duplicate and import it (spec.import), or approve the plan"
}

func runID(res *v1alpha1.InfraResource) string {
	if res.Status.LastRun == nil {
		return ""
	}
	return res.Status.LastRun.ID
}
