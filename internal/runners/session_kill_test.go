package runners

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// TestGiveUpAfterItsProcessesEndedKillsNoLaterRun: a session given up (or fenced) after its run's
// processes ended signals nothing, though a later run of the same key is running on the runner
// (issue 46: giveUp SIGKILLed whatever processes the key had, a later run's included). Real tofu.
func TestGiveUpAfterItsProcessesEndedKillsNoLaterRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bins, err := harness.Binaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tfEnv, err := harness.TerraformEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: bins[0], Dir: t.TempDir(), Env: tfEnv, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs(filepath.Join("testdata", "modules", "brief"))
	r := &Runner{Runs: pool, Log: slog.New(slog.DiscardHandler)}
	old := newSession(r, nil, func() {}, &runnerpb.RunSpec{Id: "run-old", Key: "k", LeaseMs: 60_000}, func() {})
	old.processesEnded() // its run is over; its Result waits for the manager

	later := make(chan error, 1)
	go func() {
		_, err := pool.Apply(ctx, "k", tfrunner.Spec{Module: tfrunner.Module{Source: src}, Variables: map[string]any{"run": "later"}},
			tfrunner.ApplyOptions{})
		later <- err
	}()
	for pool.Signal("k", 0) == 0 { // the later run's processes are up
		select {
		case err := <-later:
			t.Fatalf("the later run ended before the test could give the old one up: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	old.giveUp(errors.New("the manager gave the run up"))
	old.kill() // and the fence's kill likewise
	if err := <-later; err != nil {
		t.Fatalf("the later run of the key failed after the old session was given up: %v", err)
	}
	if pool.Signal("k", syscall.Signal(0)) != 0 {
		t.Fatal("processes of the key outlived its run")
	}
}
