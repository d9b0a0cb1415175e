package resource

// Approval: which plans wait for a person, and how one approves them.
//
// A plan waits when (first match):
//   - it would create again an object whose create a dead run started (InterruptedCreate,
//     creates.go), unless interruptedCreates is Retry;
//   - it would destroy or replace an object listed in spec.import (ImportedObjectReplaced);
//   - the resource's approval is Manual and the plan has changes (Manual);
//   - it would delete or replace an existing object and the resource does not allow destructive
//     changes, the default (DestructiveChange).
// A waiting plan is kept in status.pendingPlan (id, summary, changes) with Terraform's rendering in
// a Secret of the controller's namespace, and the resource says WaitingForApproval (or
// ReplaceNeedsApproval). Annotating the resource conductor.io/approve-plan=<id> (the older
// conductor.io/approve-replace is read too) makes the next run plan again and apply that plan only
// if its id is the approved one; a plan with other changes — a newer generation, or the world
// changed — is not applied: it waits in turn, and the resource says PlanDiscarded. Destroy on
// reclaim never waits (the reclaim policy is the approval).

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/resource/state"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// Reasons a plan waits, in status.pendingPlan.reason: the run's gate decides (tfrunner.Gate).
const (
	WaitManual            = v1alpha1.HoldManual
	WaitDestructive       = v1alpha1.HoldDestructive
	WaitImportedReplaced  = v1alpha1.HoldImportedReplaced
	maxPendingPlanChanges = 50
)

// approvalNeeded stops a run whose plan waits for approval, or that a Deny rule refused.
type approvalNeeded struct {
	planID, reason string
	addresses      []string
	discarded      string // the approved plan id that no longer matches, if any
	rule, message  string // the policy rule and its message (tfrunner.Hold)
}

func (e *approvalNeeded) Error() string {
	switch e.reason {
	case v1alpha1.HoldPolicyDenied:
		return fmt.Sprintf("plan %s refused by the class's policy, %s; no approval applies it: change the claim or the spec so that the plan passes", e.planID, e.message)
	case v1alpha1.HoldPolicyApproval:
		return fmt.Sprintf("plan %s waits for approval: the class's policy, %s; annotate the resource %s=%s to apply it", e.planID, e.message, v1alpha1.AnnotationApprovePlan, e.planID)
	}
	if e.reason == WaitInterruptedCreate {
		return fmt.Sprintf("plan %s waits: %s (%s=%s)", e.planID, interruptedMessage(e.addresses), v1alpha1.AnnotationApprovePlan, e.planID)
	}
	what := map[string]string{
		WaitManual:           "approval is Manual",
		WaitDestructive:      "it would delete or replace existing objects (" + strings.Join(e.addresses, ", ") + ")",
		WaitImportedReplaced: "it would destroy or replace imported objects (" + strings.Join(e.addresses, ", ") + ")",
	}[e.reason]
	msg := fmt.Sprintf("plan %s waits for approval: %s; annotate the resource %s=%s to apply it", e.planID, what, v1alpha1.AnnotationApprovePlan, e.planID)
	if e.discarded != "" {
		msg = fmt.Sprintf("the approved plan %s no longer matches (the spec or the infrastructure changed); %s", e.discarded, msg)
	}
	return msg
}

func (e *approvalNeeded) conditionReason() string {
	if e.reason == v1alpha1.HoldPolicyDenied {
		return v1alpha1.ReasonPolicyDenied
	}
	if e.reason == WaitInterruptedCreate {
		return v1alpha1.ReasonInterruptedCreate
	}
	if e.reason == WaitImportedReplaced {
		return v1alpha1.ReasonReplaceNeedsApproval
	}
	if e.discarded != "" {
		return v1alpha1.ReasonPlanDiscarded
	}
	return v1alpha1.ReasonWaitingForApproval
}

// approvedID is the plan id the resource's annotations approve ("" when none).
func approvedID(res *v1alpha1.InfraResource) string {
	if id := res.Annotations[v1alpha1.AnnotationApprovePlan]; id != "" {
		return id
	}
	return res.Annotations[v1alpha1.AnnotationApproveReplace]
}

// approved reports whether the plan that waits has been approved (a plan a Deny rule refused
// never is: no run is due for its approval).
func approved(res *v1alpha1.InfraResource) bool {
	id, pp := approvedID(res), res.Status.PendingPlan
	return id != "" && pp != nil && id == pp.ID && pp.Reason != v1alpha1.HoldPolicyDenied
}

// needsSavedPlan reports whether the resource's runs must stop between plan and apply: Manual
// approval, imports, or the destructive-change guard on a resource that has objects to destroy.
// A first provisioning under the guard is one apply -json: there is nothing to delete yet.
func needsSavedPlan(res *v1alpha1.InfraResource) bool {
	hasState := state.EverApplied(res) || res.Spec.AdoptState != "" || (res.Status.State != nil && res.Status.State.Serial > 0)
	return res.Spec.Approval == v1alpha1.ApprovalManual || len(res.Spec.Import) > 0 || holdsCreates(res) ||
		(!res.Spec.AllowDestructiveChanges && hasState)
}

// gateOf is the gate of the resource's next saved plan (see the package comment above): the
// approval annotation, Manual approval, the destructive-change guard, the imported addresses, the
// creates a dead run left in doubt (unless the policy is Retry; with Resolve, the run decides them
// first, with the resource's import identities), and the plan already shown as
// waiting at this generation. Call it once the new run is recorded (runID is the new run's).
func gateOf(res *v1alpha1.InfraResource) *tfrunner.Gate {
	g := &tfrunner.Gate{Approved: approvedID(res), Manual: res.Spec.Approval == v1alpha1.ApprovalManual,
		AllowDestructive: res.Spec.AllowDestructiveChanges}
	for _, imp := range res.Spec.Import {
		g.Imported = append(g.Imported, tfrunner.ModuleAddress(imp.Address))
	}
	if holdsCreates(res) && res.Status.CreatesPendingRun != runID(res) {
		g.CreatesInDoubt = slices.Clone(res.Status.CreatesPending)
		g.ResolveCreates, g.Identities, g.Owner = resolves(res), identities(res), res.Name
	}
	if pp := res.Status.PendingPlan; pp != nil && pp.Generation == res.Generation {
		g.Shown, g.ShownReason = pp.ID, pp.Reason
	}
	return g
}

// planPassed records that the run's gate let saved plan p through, before it is applied (the
// tfrunner.Applying event; the caller checkpoints): no plan waits any more, creates a dead run
// left are settled (the plan does not create them again, or it was approved; this apply records
// its own), and the run is an apply of p.
func planPassed(res *v1alpha1.InfraResource, p *tfjson.Plan) {
	res.Status.PendingPlan = nil
	if res.Status.CreatesPendingRun != runID(res) {
		res.Status.CreatesPending, res.Status.CreatesPendingRun = nil, ""
	}
	res.Status.LastRun.Operation = "apply"
	res.Status.LastRun.Summary = summaryOf(p)
	res.Status.LastRun.PlanID = p.ID
}

// holdPlan records a plan the run's gate held: unless people have seen it already (no rendering
// came back and it is the plan that waits), it stores Terraform's rendering for admins, shows the
// plan in status.pendingPlan and says so in an event. It returns the *approvalNeeded that stops
// the run (runFailed records it), or the error of writing the rendering.
func (r *syncer) holdPlan(ctx context.Context, res *v1alpha1.InfraResource, h *tfrunner.Hold, digest string) error {
	p := h.Plan
	an := &approvalNeeded{planID: p.ID, reason: h.Reason, addresses: h.Addresses, discarded: h.Discarded, rule: h.Rule, message: h.Message}
	if pp := res.Status.PendingPlan; h.Rendering == "" && pp != nil && pp.ID == p.ID && pp.Reason == h.Reason {
		// The same plan already waits: nothing new to show; the rule that holds it now is said.
		pp.PolicyDigest, pp.Rule, pp.Message = digest, h.Rule, h.Message
		return an
	}
	rendering, err := r.keeper.Seal(h.Rendering)
	if err != nil {
		return fmt.Errorf("encrypting the plan's rendering: %w", err)
	}
	secret, err := r.secrets.WritePlan(ctx, res, rendering)
	if err != nil {
		return err
	}
	pending := &v1alpha1.PendingPlan{ID: p.ID, Reason: h.Reason, Rule: h.Rule, Message: h.Message, Summary: *summaryOf(p),
		Generation: res.Generation, CreatedAt: metav1.Now(), Secret: secret, PolicyDigest: digest}
	for i, c := range p.Changes {
		if i == maxPendingPlanChanges {
			break
		}
		pending.Changes = append(pending.Changes, c.Address+": "+strings.Join(c.Actions, "+"))
	}
	res.Status.PendingPlan = pending
	kind := corev1.EventTypeNormal
	if h.Reason == v1alpha1.HoldPolicyDenied {
		kind = corev1.EventTypeWarning
	}
	if h.Rule != "" {
		class := ""
		if res.Spec.ClassRef != nil {
			class = res.Spec.ClassRef.Name
		}
		metrics.PolicyViolation(class, h.Rule, h.Reason)
	}
	r.recorder.Eventf(res, nil, kind, an.conditionReason(), "Plan", "%s", an.Error())
	return an
}
