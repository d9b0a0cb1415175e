package resource

import (
	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
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
