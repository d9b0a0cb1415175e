package resource

// Interrupted creates: crossplane-runtime's create-pending protocol (managed reconciler,
// meta.SetExternalCreatePending / ExternalCreateIncomplete), for Terraform.
//
// Terraform cannot know whether a create that a dead process started happened: the object may
// exist while no saved state says so, and the next plan would create it again beside the first.
// So, while an apply streams, each address whose create starts (apply_start) is written to
// status.createsPending before the next event is read; the list is cleared when the apply's
// process ends on its own (having saved its state). A list that is still there when the next run
// begins was left by a run that died; that run's plan is saved. With interruptedCreates Resolve (the
// default) the run first decides each address it can (tfrunner.resolveCreates): an address with an
// import identity (spec.importIdentities) is imported when its object exists (CreateAdopted) and
// created when the provider finds none (CreateRetried); objects that live only in state are never
// in doubt unless a provisioner of theirs started. What is left, or everything under Hold, makes a
// plan that would create it again wait for approval with reason InterruptedCreate (CreateHeld),
// naming the addresses, so that an operator can look for a duplicate, import it (spec.import), or
// approve the plan. Creates that never started are never held.

import (
	"context"
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
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

// settleCreates clears status.createsPending after an apply whose state is stored (stored: the
// state server holds no state of it that waits to be written, and its errored.tfstate, if any,
// was kept), per address: a create of this run is settled when its apply ended with the
// provider's answer (ended, the run's apply_complete and apply_errored: created and in that
// state, or refused), or when the run succeeded. A create cut off mid-way — the run interrupted
// (SIGINT at the drain deadline or on lost leadership: an SDKv2 provider may leave a half-made
// object), killed, or its provider crashed (tfrunner.Killed) — stays for the next run's gate, as
// does everything while the state is not stored yet.
//
// A successful run also settles the creates an earlier dead run left: its plan passed the gate
// (so it did not create them again, or was approved) or had no changes at all.
func settleCreates(res *v1alpha1.InfraResource, ended []string, runErr error, stored bool) {
	mine := res.Status.CreatesPendingRun == runID(res)
	stored = stored && !errors.Is(runErr, tfrunner.ErrStateNotKept)
	switch {
	case !stored || len(res.Status.CreatesPending) == 0:
		return
	case runErr == nil:
		res.Status.CreatesPending = nil
	case mine && !tfrunner.Killed(runErr):
		res.Status.CreatesPending = slices.DeleteFunc(res.Status.CreatesPending, func(a string) bool { return slices.Contains(ended, a) })
	}
	if len(res.Status.CreatesPending) == 0 {
		res.Status.CreatesPending, res.Status.CreatesPendingRun = nil, ""
	}
}

// unrecordedCreates records, before the state lock of the resource's dead last run is released,
// that the run may have started creates it had no time to record (v1alpha1.CreatesUnrecorded):
// Terraform calls a provider's create as soon as it writes apply_start, so a process killed before
// the controller wrote that event down leaves an object no state and no record holds. The lock is
// the witness that Terraform was running; only a run recorded as an apply (one apply -json, or a
// saved plan that passed its gate) may have been creating. It checkpoints the mark, so that a
// controller that dies next still finds it; nothing is written for a plan or destroy run, or when
// the mark is there already.
func unrecordedCreates(ctx context.Context, s *resourceScope) error {
	if !markUnrecorded(s.res) {
		return nil
	}
	return s.checkpoint(ctx)
}

// recoverLock recovers the state lock a dead run of the resource left (state.Keeper.RecoverOwnLock),
// marking first the creates it may have left unrecorded (unrecordedCreates), before a sync's run.
// A Delete reclaim recovers without the mark: its destroy removes what the state holds, and an
// object a dead apply created unrecorded is left (docs/state.md, What is not guaranteed).
func recoverLock(ctx context.Context, keeper *state.Keeper, s *resourceScope) error {
	return keeper.RecoverOwnLock(ctx, s.res, s.state, func() error { return unrecordedCreates(ctx, s) })
}

// markUnrecorded adds v1alpha1.CreatesUnrecorded to status.createsPending when the last run was
// an apply and the mark is not there yet (the list's run stays the one that started its
// addresses, or becomes the last run); it reports whether it did.
func markUnrecorded(res *v1alpha1.InfraResource) bool {
	last := res.Status.LastRun
	if last == nil || last.Operation != "apply" || slices.Contains(res.Status.CreatesPending, v1alpha1.CreatesUnrecorded) {
		return false
	}
	res.Status.CreatesPending = append(res.Status.CreatesPending, v1alpha1.CreatesUnrecorded)
	if res.Status.CreatesPendingRun == "" {
		res.Status.CreatesPendingRun = last.ID
	}
	return true
}

// holdsCreates reports whether the resource must stop between plan and apply because a dead run
// left creates in doubt (and the policy is Hold).
func holdsCreates(res *v1alpha1.InfraResource) bool {
	return len(res.Status.CreatesPending) > 0 && res.Spec.InterruptedCreates != v1alpha1.InterruptedCreatesRetry
}

// resolves reports whether the resource's runs decide creates in doubt themselves (Resolve, the
// default; an empty policy is Resolve, as the API server defaults it).
func resolves(res *v1alpha1.InfraResource) bool {
	p := res.Spec.InterruptedCreates
	return p == "" || p == v1alpha1.InterruptedCreatesResolve
}

// identities are the resource's import identities by module address, for tfrunner.Gate.
func identities(res *v1alpha1.InfraResource) map[string]string {
	if len(res.Spec.ImportIdentities) == 0 {
		return nil
	}
	out := make(map[string]string, len(res.Spec.ImportIdentities))
	for addr, id := range res.Spec.ImportIdentities {
		out[tfrunner.ModuleAddress(addr)] = id
	}
	return out
}

// recordResolutions puts a run's decisions about creates in doubt into its status (and so the run
// history) and says each as an event naming its addresses: CreateAdopted, CreateRetried (Normal),
// CreateHeld (Warning).
func (r *syncer) recordResolutions(res *v1alpha1.InfraResource, decided []tfrunner.Resolution) {
	if len(decided) == 0 || res.Status.LastRun == nil {
		return
	}
	by := map[string][]string{}
	for _, d := range decided {
		res.Status.LastRun.Resolutions = append(res.Status.LastRun.Resolutions,
			v1alpha1.CreateResolution{Address: d.Address, Decision: d.Decision, ID: d.ID, Reason: d.Detail})
		text := d.Address
		if d.ID != "" {
			text += " (ID " + d.ID + ")"
		}
		by[d.Decision] = append(by[d.Decision], text+": "+d.Detail)
	}
	events := []struct{ decision, reason, kind, lead string }{
		{tfrunner.CreateAdopted, v1alpha1.ReasonCreateAdopted, corev1.EventTypeNormal, "adopted into state, not created again"},
		{tfrunner.CreateRetried, v1alpha1.ReasonCreateRetried, corev1.EventTypeNormal, "created again: the interrupted create never happened"},
		{tfrunner.CreateHeld, v1alpha1.ReasonCreateHeld, corev1.EventTypeWarning, "held for a person"},
	}
	for _, e := range events {
		if len(by[e.decision]) > 0 {
			r.recorder.Eventf(res, nil, e.kind, e.reason, "ResolveCreates", "%s: %s", e.lead, strings.Join(by[e.decision], "; "))
		}
	}
}

// interruptedMessage explains a held plan.
func interruptedMessage(addresses []string) string {
	return "a run that died during its apply may have created " + strings.Join(addresses, ", ") +
		" (it had started creating them, or died before it could record which creates it had started); this plan would create them again. Look for a duplicate and import it (spec.import), or approve the plan"
}

func runID(res *v1alpha1.InfraResource) string {
	if res.Status.LastRun == nil {
		return ""
	}
	return res.Status.LastRun.ID
}
