package runners

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// leaveErrored writes an errored.tfstate into key's workspace of the pool at dir, as a run of
// runID that could not save its state leaves it (tfrunner tags it with the run).
func leaveErrored(t *testing.T, dir, key, runID, state string) {
	t.Helper()
	ws := filepath.Join(dir, key)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "errored.tfstate"), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "errored.tfstate.run"), []byte(runID), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Issue 46: an errored state left by an earlier run goes to the state server under that run's
// ID, never under the ID of the run about to start. Before, the Router kept it under the new
// run's ID, so an old N+1 rode on a later run and could overwrite a newer N+1. A state the server
// refuses as not its run's is dropped, said once, and no longer stops the key's runs.
func TestErroredStateIsKeptUnderTheRunThatLeftIt(t *testing.T) {
	dir := t.TempDir()
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: tfrunner.Binary{Path: "/bin/false"}, Dir: dir, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	leaveErrored(t, dir, "res-a", "run-old", `{"serial": 4}`)
	var keptFor []string
	notKept := errors.New("the API server is unavailable")
	r := &Router{Local: pool, KeepErrored: func(_ context.Context, runID string, _ []byte) error {
		keptFor = append(keptFor, runID)
		return notKept
	}}
	_, err = r.Apply(context.Background(), "res-a", tfrunner.Spec{RunID: "run-new"}, tfrunner.ApplyOptions{})
	if !errors.Is(err, ErrStateNotKept) || !errors.Is(err, notKept) {
		t.Fatalf("apply with an errored state not kept: %v; want ErrStateNotKept", err)
	}
	if len(keptFor) != 1 || keptFor[0] != "run-old" {
		t.Fatalf("KeepErrored called for %v; want [run-old], the run that left the state", keptFor)
	}
	if _, ok := pool.ErroredState("res-a"); !ok {
		t.Fatal("an errored state that could not be kept was dropped")
	}

	r.KeepErrored = func(_ context.Context, runID string, _ []byte) error {
		return &statebackend.ErroredStateRefusedError{RunID: runID, Reason: "its lock is gone"}
	}
	var refused *statebackend.ErroredStateRefusedError
	if err := r.keepErrored(context.Background(), "res-a"); !errors.As(err, &refused) || refused.RunID != "run-old" {
		t.Fatalf("refused errored state: %v; want the refusal for run-old", err)
	}
	if _, ok := pool.ErroredState("res-a"); ok {
		t.Error("a refused errored state was not dropped")
	}
	if err := r.keepErrored(context.Background(), "res-a"); err != nil {
		t.Errorf("after the refusal: %v; want nothing left to keep", err)
	}
}

// Issue 46: a runner's workspace starts clean, so that a Result carries only what its own run
// left: the errored state of an earlier run the manager gave up is dropped (and logged), not sent.
func TestRunnerWorkspaceStartsClean(t *testing.T) {
	dir := t.TempDir()
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: tfrunner.Binary{Path: "/bin/false"}, Dir: dir, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	leaveErrored(t, dir, "res-a", "run-old", `{"serial": 4}`)
	r := &Runner{Runs: pool, Log: slog.New(slog.DiscardHandler)}
	r.startClean(&runnerpb.RunSpec{Id: "run-new", Key: "res-a"})
	if e, ok := pool.ErroredState("res-a"); ok {
		t.Errorf("the workspace still holds the errored state of %q", e.RunID)
	}
}
