package tfrunner

import (
	"os"
	"path/filepath"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// erroredStateFile is where Terraform writes the state it could not save to its backend, in the
// working directory ("Failed to save state … written to errored.tfstate").
const erroredStateFile = "errored.tfstate"

// erroredRunFile names, beside errored.tfstate, the run that left it (tagErrored).
const erroredRunFile = "errored.tfstate.run"

// ErroredState is a state a run could not save to its backend (Terraform's errored.tfstate) and
// the run that produced it (Spec.RunID; "" when the run had no ID). It is kept only for that run:
// a later run of the key never carries it under its own ID.
type ErroredState struct {
	// RunID is the run that left the state (erroredRunFile beside it).
	RunID string
	// State is the state JSON as Terraform wrote it.
	State []byte
}

// ErroredState returns the errored state key's workspace holds, with the run that left it
// (tagErrored); false when there is none.
func (p *Pool) ErroredState(key string) (ErroredState, bool) {
	if !validKey.MatchString(key) {
		return ErroredState{}, false
	}
	dir := filepath.Join(p.opts.Dir, key)
	data, err := wsfs.ReadIn(dir, erroredStateFile)
	if err != nil || len(data) == 0 {
		return ErroredState{}, false // none, or not a file the run's Terraform wrote (a link, a hard link)
	}
	runID, _ := wsfs.ReadIn(dir, erroredRunFile)
	return ErroredState{RunID: string(runID), State: data}, true
}

// tagErrored records runID as the producer of the errored state a run of key just left, if any
// and not tagged yet (a run starts only once an earlier run's errored state is kept or dropped,
// Router).
func (p *Pool) tagErrored(key, runID string) {
	if !validKey.MatchString(key) {
		return
	}
	dir := filepath.Join(p.opts.Dir, key)
	if fi, err := os.Lstat(filepath.Join(dir, erroredStateFile)); err != nil || !wsfs.OneLinkRegular(fi) {
		return
	}
	if _, err := os.Lstat(filepath.Join(dir, erroredRunFile)); err == nil {
		return
	}
	_ = wsfs.WriteIn(dir, erroredRunFile, []byte(runID), 0o600)
}

// ClearErroredState removes key's errored.tfstate (and its tag) once its state is saved.
func (p *Pool) ClearErroredState(key string) {
	if validKey.MatchString(key) {
		_ = os.Remove(filepath.Join(p.opts.Dir, key, erroredStateFile))
		_ = os.Remove(filepath.Join(p.opts.Dir, key, erroredRunFile))
	}
}
