package resource

// Drift: once a resource's spec is applied, every sync interval (spread by ±10 %) brings a
// read-only check — plan -json -detailed-exitcode -lock=false, no lock taken, nothing written —
// instead of an apply. A check that finds objects changed outside Terraform, or a plan with
// changes, sets the Drifted condition (naming the addresses) and emits DriftDetected; then
// driftPolicy Correct (the default) applies the spec through the usual rules (approval, the
// destructive-change guard), and Report only tells. At most MaxConcurrentDriftChecks checks run at
// once, so that checks never take more than that share of the runner pool (as Terranetes
// throttles its drift checks).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// driftRetry is how soon a drift check that found every drift slot taken is tried again.
const driftRetry = 5 * time.Second

// isDriftCheck reports whether the run due now is a drift check: the current generation was
// applied and the last run (an apply or a check) succeeded; what is due is the sync interval.
func isDriftCheck(res *v1alpha1.InfraResource) bool {
	last := res.Status.LastRun
	return last != nil && last.Result == v1alpha1.RunSucceeded && last.Generation == res.Generation &&
		res.Status.ObservedGeneration == res.Generation
}

// checkForDrift runs a drift check instead of the apply when the run due is the sync interval's
// (isDriftCheck) and no Secret input rotated; the reconcile ends there unless the drift must be
// corrected now. The apply then uses the same inputs (backend() replaces the check's revoked
// credentials).
//
// A reconcile that ends here keeps the connection Secret too, and comes back within the Secret
// check interval, as an idle one does (decideRun): with drift checks due at every sync interval,
// the reconciles they wake were otherwise the only ones, and a Secret deleted by hand while
// another object held its name was never written again.
func (r *drifter) checkForDrift(ctx context.Context, s *resourceScope) (ctrl.Result, error) {
	if !isDriftCheck(s.res) || rotated(s.res, s.spec) {
		return ctrl.Result{}, nil
	}
	correct, result, err := r.checkDrift(ctx, s)
	if correct && err == nil {
		return ctrl.Result{}, nil
	}
	if err == nil && s.res.Status.ConnectionSecret != nil {
		if result.RequeueAfter > r.secretCheckInterval {
			result.RequeueAfter = r.secretCheckInterval
		}
		err = r.secrets.KeepConnectionSecret(ctx, s.res, s.state)
	}
	return s.end(result), err
}

// checkDrift runs a drift check and records what it found. correct says the drift must be
// corrected now (policy Correct; the finding is then a checkpoint); otherwise result is when to
// check again.
func (r *drifter) checkDrift(ctx context.Context, s *resourceScope) (correct bool, result ctrl.Result, err error) {
	res, spec := s.res, s.spec
	if !r.takeDriftSlot() {
		return false, ctrl.Result{RequeueAfter: shared.Jitter(driftRetry)}, nil
	}
	defer r.releaseDriftSlot()
	now := time.Now()
	undoRun := beginRun(&res.Status, r.identity.newRun(res, "drift", now))
	prevRequest := handleReconcileRequest(res)
	revoke := r.keeper.UseBackend(s.res, &spec)
	check, err := r.runs.DriftCheck(ctx, res.Name, spec)
	revoke()
	done := time.Now()
	metrics.ObserveRun("drift", runResult(nil, err), done.Sub(now))
	if err != nil {
		// A failed check changes nothing: the last apply stands; retry with backoff.
		undoRun()
		restoreReconcileRequest(res, prevRequest)
		return false, ctrl.Result{}, fmt.Errorf("resource %s: drift check: %w", res.Name, err)
	}
	addresses := driftAddresses(check)
	// A class's discovery listing (data sources only) changes nothing but its outputs: a listing
	// that reads another set of candidates is applied, so that its outputs reach the class.
	relisted := res.Labels[v1alpha1.LabelDiscoveryOf] != "" && check.OutputsChanged && !check.Plan.HasChanges && len(addresses) == 0
	drifted := check.Plan.HasChanges || len(addresses) > 0 || relisted
	res.Status.Drift = &v1alpha1.DriftStatus{CheckedAt: metav1.NewTime(done), Drifted: drifted, Addresses: addresses}
	res.Status.LastRun.Result = v1alpha1.RunSucceeded
	res.Status.LastRun.CompletionTime = &metav1.Time{Time: done}
	res.Status.LastRun.Summary = summaryOf(check.Plan)
	res.Status.LastRun.PlanID = check.Plan.ID
	r.secrets.RecordRun(ctx, res, strings.Join(check.Log, "\n"))
	if !drifted {
		markDrift(res, false, "the infrastructure matches the state and the spec")
		return false, ctrl.Result{RequeueAfter: shared.Jitter(interval(res, r.syncInterval))}, nil
	}
	policy := res.Spec.DriftPolicy
	if policy == "" {
		policy = v1alpha1.DriftCorrect
	}
	msg := fmt.Sprintf("the infrastructure drifted (%s); driftPolicy %s", strings.Join(addresses, ", "), policy)
	if relisted {
		policy = v1alpha1.DriftCorrect
		msg = "the discovery listing found other candidates: applied to publish them"
	}
	markDrift(res, true, msg)
	if !relisted {
		r.recorder.Eventf(res, nil, corev1.EventTypeWarning, v1alpha1.ReasonDriftDetected, "DriftCheck", "%s", msg)
		metrics.DriftDetected(string(policy))
	}
	if policy == v1alpha1.DriftReport {
		return false, ctrl.Result{RequeueAfter: shared.Jitter(interval(res, r.syncInterval))}, nil
	}
	if err := s.checkpoint(ctx); err != nil {
		return false, ctrl.Result{}, err
	}
	return true, ctrl.Result{}, nil
}

// driftAddresses lists, sorted and once each, the objects changed outside Terraform and the
// addresses the plan would change.
func driftAddresses(check *tfjson.StreamResult) []string {
	out := slices.Clone(check.Drift)
	for _, c := range check.Plan.Changes {
		out = append(out, c.Address)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (r *drifter) takeDriftSlot() bool {
	select {
	case r.driftSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (r *drifter) releaseDriftSlot() { <-r.driftSlots }
