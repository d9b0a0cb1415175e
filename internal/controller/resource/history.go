package resource

import (
	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// The run history in status: status.lastRun and status.runs (the plan and log Secrets are
// resource/secrets').

// beginRun makes run status.lastRun and moves the run it replaces to the head of status.runs
// (newest first, at most maxRunHistory-1 there, so lastRun and runs hold maxRunHistory runs; a
// run is kept once by its id, which also drops the copy of lastRun an earlier controller kept in
// runs[0]). undo puts both fields back as they were: a drift check that failed records nothing.
func beginRun(st *v1alpha1.InfraResourceStatus, run *v1alpha1.RunStatus) (undo func()) {
	prevLast, prevRuns := st.LastRun, st.Runs
	undo = func() { st.LastRun, st.Runs = prevLast, prevRuns }
	st.LastRun = run
	if prevLast == nil {
		return undo
	}
	runs := make([]v1alpha1.RunStatus, 0, maxRunHistory-1)
	runs = append(runs, *prevLast.DeepCopy())
	for _, old := range prevRuns {
		if len(runs) == maxRunHistory-1 {
			break
		}
		if old.ID != "" && (old.ID == prevLast.ID || old.ID == run.ID) {
			continue
		}
		runs = append(runs, old)
	}
	st.Runs = runs
	return undo
}

// maxRunHistory is how many runs status.lastRun and status.runs keep together.
const maxRunHistory = 5
