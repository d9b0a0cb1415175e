package resource

import (
	"fmt"
	"slices"
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func runIDs(runs []v1alpha1.RunStatus) []string {
	ids := make([]string, 0, len(runs))
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

// TestBeginRun: status.lastRun is the newest run and status.runs the ones before it, newest
// first, each once, together maxRunHistory; undo restores both.
func TestBeginRun(t *testing.T) {
	st := &v1alpha1.InfraResourceStatus{}
	for i := 1; i <= 7; i++ {
		beginRun(st, &v1alpha1.RunStatus{ID: fmt.Sprint("r", i), Result: v1alpha1.RunSucceeded})
	}
	if st.LastRun.ID != "r7" {
		t.Fatalf("lastRun = %s, want r7", st.LastRun.ID)
	}
	if got, want := runIDs(st.Runs), []string{"r6", "r5", "r4", "r3"}; !slices.Equal(got, want) {
		t.Fatalf("runs = %v, want %v", got, want)
	}
	if got := runIDs(st.RunHistory()); !slices.Equal(got, []string{"r7", "r6", "r5", "r4", "r3"}) {
		t.Errorf("RunHistory = %v", got)
	}

	undo := beginRun(st, &v1alpha1.RunStatus{ID: "drift"})
	undo()
	if st.LastRun.ID != "r7" || !slices.Equal(runIDs(st.Runs), []string{"r6", "r5", "r4", "r3"}) {
		t.Errorf("after undo: lastRun %s, runs %v; want r7 and r6..r3", st.LastRun.ID, runIDs(st.Runs))
	}

	// An earlier controller copied lastRun into runs[0]: the copy is dropped, not kept twice.
	old := &v1alpha1.InfraResourceStatus{
		LastRun: &v1alpha1.RunStatus{ID: "b"},
		Runs:    []v1alpha1.RunStatus{{ID: "b"}, {ID: "a"}},
	}
	if got := runIDs(old.RunHistory()); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("RunHistory of an earlier controller's status = %v, want [b a]", got)
	}
	beginRun(old, &v1alpha1.RunStatus{ID: "c"})
	if got := runIDs(old.Runs); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("runs = %v, want [b a]", got)
	}
}
