package resource

import (
	"context"
	"sync"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// recordingRuns is a Runs that runs nothing and counts what it was asked: the reconciler's
// decisions are tested with it, never whether a run works (the lifecycle suite does that).
type recordingRuns struct {
	NoAdoption
	mu       sync.Mutex
	applies  int
	destroys int
	drifts   int
}

func (f *recordingRuns) Apply(context.Context, string, tfrunner.Spec, tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applies++
	return &tfrunner.ApplyResult{}, nil
}

func (f *recordingRuns) Destroy(context.Context, string, tfrunner.Spec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.destroys++
	return nil
}

func (f *recordingRuns) DriftCheck(context.Context, string, tfrunner.Spec) (*tfjson.StreamResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drifts++
	return &tfjson.StreamResult{Plan: &tfjson.Plan{ID: "check"}}, nil
}
