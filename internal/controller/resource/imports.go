package resource

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Import results recorded in status.imports.
const (
	ImportImported       = "Imported"
	ImportAlreadyInState = "AlreadyInState"
	ImportFailed         = "Failed"
)

// Imports and adoption: existing infrastructure and orphaned state brought under a resource.

// recordImports keeps each import's outcome in status, and counts this run's imports in the
// summary. An address imported by an earlier run stays "Imported" when later runs find it in state.
func recordImports(res *v1alpha1.InfraResource, imports []tfrunner.ImportResult) {
	if len(imports) == 0 {
		return
	}
	earlier := map[string]v1alpha1.ImportStatus{}
	for _, st := range res.Status.Imports {
		earlier[st.Address+"\x00"+st.ID] = st
	}
	res.Status.Imports = nil
	imported := int32(0)
	for _, imp := range imports {
		st := v1alpha1.ImportStatus{Address: imp.Address, ID: imp.ID, Result: ImportAlreadyInState}
		switch {
		case imp.Err != nil:
			st.Result = ImportFailed
			st.Message = terraformMessage(imp.Err)
		case imp.Imported:
			st.Result = ImportImported
			imported++
		case earlier[imp.Address+"\x00"+imp.ID].Result == ImportImported:
			st.Result = ImportImported
		}
		res.Status.Imports = append(res.Status.Imports, st)
	}
	if res.Status.LastRun != nil && imported > 0 {
		if res.Status.LastRun.Summary == nil {
			res.Status.LastRun.Summary = &v1alpha1.PlanSummary{}
		}
		res.Status.LastRun.Summary.Import = imported
	}
}

// adoptState makes the orphaned state Secret named in spec.adoptState this resource's state, once,
// before its first plan (see statebackend.Adopt).
//
// A resource that does not ask to adopt never silently takes over state that a deleted Retain
// resource of the same name orphaned: it is refused until spec.adoptState names that Secret.
func (r *stateKeeper) adoptState(ctx context.Context, s *resourceScope) error {
	res := s.res
	from := res.Spec.AdoptState
	if res.Status.State != nil && res.Status.State.AdoptedFrom == from && from != "" {
		return nil
	}
	if from == "" {
		if everApplied(res) {
			return nil
		}
		// An orphaned state under the resource's own name (chooseStateName then gave it another)
		// is likely the infrastructure this resource means: creating it again would duplicate it.
		own := statebackend.SuffixFor(res.Name)
		if s.state.Suffix() == own {
			return nil // chooseStateName found nothing under its own name: that state is its own
		}
		orphanedFrom, err := r.states().For(own).OrphanedFrom(ctx)
		if err != nil || orphanedFrom == "" {
			return err
		}
		name := statebackend.SecretName(statebackend.DefaultWorkspace, own)
		return &statebackend.AdoptError{Message: fmt.Sprintf(
			"state Secret %s was orphaned by the deleted resource %s; set spec.adoptState: %s to adopt it, or delete it", name, orphanedFrom, name)}
	}
	if err := s.state.Adopt(ctx, from, v1alpha1.LabelValue(res.Name)); err != nil {
		return err
	}
	if res.Status.State == nil {
		res.Status.State = &v1alpha1.StateStatus{}
	}
	res.Status.State.AdoptedFrom = from
	r.recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonStateAdopted, "Adopt", "adopted orphaned state %s", from)
	return nil
}
