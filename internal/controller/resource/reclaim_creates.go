package resource

import (
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// resolveCreatesOnDelete decides, before a Delete reclaim destroys, the creates a run that died
// left in doubt (status.createsPending), with the resource's import identities, as an apply would
// (tfrunner's resolveCreates): an object that exists is imported into state, so that destroy
// removes it (CreateAdopted); one the provider finds none of was never made (CreateRetried: here,
// nothing to do); an address already in state is destroyed with the rest. The run plans behind a
// gate that holds every plan (Manual, nothing approved), so nothing is created or changed.
// createsPending keeps only what stayed undecidable (no identity, an import that failed
// otherwise), which createsInDoubtOnDelete then asks a person about.
//
// It runs only under interruptedCreates Resolve, with identities, and without conductor.io/abandon,
// and reports whether it ran (the state may then hold objects it did not: read it again). A run
// that fails decides nothing (the run is recorded as failed; a person is asked as before); the
// returned error is only a lock recovery's or a status checkpoint's.
func (r *reclaimer) resolveCreatesOnDelete(ctx context.Context, s *resourceScope) (bool, error) {
	res := s.res
	ids := identities(res)
	if len(res.Status.CreatesPending) == 0 || len(ids) == 0 || !resolves(res) || res.Annotations[v1alpha1.AnnotationAbandon] == "true" {
		return false, nil
	}
	spec, err := r.secrets.RunSpec(ctx, res)
	if err != nil {
		return false, nil // createsInDoubtOnDelete asks a person
	}
	pending := slices.Clone(res.Status.CreatesPending)
	gate := &tfrunner.Gate{Manual: true, CreatesInDoubt: pending, ResolveCreates: true, Identities: ids, Owner: res.Name}
	var out *tfrunner.ApplyResult
	done, err, stopped := r.reclaimRun(ctx, s, "plan", &spec, func() (err error) {
		out, err = r.runs.Apply(ctx, res.Name, spec, tfrunner.ApplyOptions{Gate: gate})
		return err
	})
	if stopped != nil {
		return false, stopped
	}
	if err != nil {
		r.sync.setRunFailed(res, "plan", v1alpha1.ReasonPlanFailed, "resolving the creates in doubt before destroy: "+terraformMessage(err), done)
		return true, nil
	}
	res.Status.LastRun.Result = v1alpha1.RunSucceeded
	res.Status.LastRun.CompletionTime = &metav1.Time{Time: done}
	r.sync.recordResolutions(res, out.Resolutions)
	held := map[string]bool{}
	for _, d := range out.Resolutions {
		held[d.Address] = d.Decision == tfrunner.CreateHeld
	}
	// Adopted (now in state), retried (never made) and those already in state (no resolution:
	// destroy sees them) are settled; only what stayed held remains.
	res.Status.CreatesPending = slices.DeleteFunc(res.Status.CreatesPending, func(a string) bool {
		return a != v1alpha1.CreatesUnrecorded && !held[a] // unrecorded creates stay: no identity decides them all
	})
	if len(res.Status.CreatesPending) == 0 {
		res.Status.CreatesPending, res.Status.CreatesPendingRun = nil, ""
	}
	return true, s.checkpoint(ctx)
}
