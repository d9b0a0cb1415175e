package runners

// The Dispatcher's runs: the tfrunner.Runs methods (Apply, Destroy, DriftCheck, Busy, Forget, errored
// state) that queue a run for a runner of its pool and turn the runner's result into tfrunner's.

import (
	"context"
	"fmt"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// newRunSpec is the RunSpec of op on key's spec; it fails when spec does not convert (see
// specToProto).
func newRunSpec(op runnerpb.Operation, key string, spec tfrunner.Spec) (*runnerpb.RunSpec, error) {
	s, err := specToProto(spec)
	if err != nil {
		return nil, fmt.Errorf("run of %s: %w", key, err)
	}
	return &runnerpb.RunSpec{Id: spec.RunID, Op: op, Key: key, Spec: s}, nil
}

// Apply runs spec's apply on a runner of spec.RunnerPool; see tfrunner.Pool.Apply for the
// result and errors, plus *RunnerLostError when the runner was lost mid-run.
func (d *Dispatcher) Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error) {
	rs, err := newRunSpec(runnerpb.Operation_OPERATION_APPLY, key, spec)
	if err != nil {
		return &tfrunner.ApplyResult{}, err
	}
	rs.Imports, rs.CheckInputs, rs.Gate, rs.Events = importsToProto(opts.Imports), opts.CheckInputs, gateToProto(opts.Gate), opts.Events != nil
	// Started before the run is queued: a runner's first command follows the hand-over, which
	// happens on the runner's stream, not here.
	if err := opts.Events.Send(tfrunner.Started{}); err != nil {
		return &tfrunner.ApplyResult{}, fmt.Errorf("%w: %w", tfrunner.ErrStopped, err)
	}
	j, err := d.do(ctx, spec.RunnerPool, rs, opts)
	if j == nil || j.result == nil {
		return &tfrunner.ApplyResult{}, err
	}
	return applyOutcome(j, err)
}

// applyOutcome is what an apply's Result comes to: err (the run's own error, from the Result or
// its carrier) or the conversion's; a Result with neither an error nor an apply outcome with its
// plan (every apply that ends without an error planned) is errNoOutcome. The ApplyResult is never
// nil.
func applyOutcome(j *job, err error) (*tfrunner.ApplyResult, error) {
	res, convErr := applyResultFromProto(j.result.GetApply())
	if err == nil {
		err = convErr
	}
	if err == nil && res.Plan == nil {
		err = errNoOutcome(j, "apply")
	}
	return res, err
}

// driftOutcome is what a drift check's Result comes to: err, or errNoOutcome for a Result with
// neither an error nor a drift outcome with its plan.
func driftOutcome(j *job, err error) (*tfjson.StreamResult, error) {
	res := streamResultFromProto(j.result.GetDrift())
	if err == nil && (res == nil || res.Plan == nil) {
		return nil, errNoOutcome(j, "drift check")
	}
	return res, err
}

// errNoOutcome is the error of a Result that carries neither an error nor the outcome of its
// operation (a runner's bug, or a forged result): the run's outcome is unknown, as after a lost
// runner, so creates it started stay in doubt.
func errNoOutcome(j *job, what string) error {
	return fmt.Errorf("the runner's result of run %s has no %s outcome (with its plan) and no error: %w", j.spec.GetId(), what, tfrunner.ErrProcessLost)
}

// Destroy runs spec's destroy on a runner of spec.RunnerPool.
func (d *Dispatcher) Destroy(ctx context.Context, key string, spec tfrunner.Spec) error {
	rs, err := newRunSpec(runnerpb.Operation_OPERATION_DESTROY, key, spec)
	if err != nil {
		return err
	}
	_, err = d.do(ctx, spec.RunnerPool, rs, tfrunner.ApplyOptions{})
	return err
}

// DriftCheck runs spec's read-only plan on a runner of spec.RunnerPool.
func (d *Dispatcher) DriftCheck(ctx context.Context, key string, spec tfrunner.Spec) (*tfjson.StreamResult, error) {
	rs, err := newRunSpec(runnerpb.Operation_OPERATION_DRIFT_CHECK, key, spec)
	if err != nil {
		return nil, err
	}
	j, err := d.do(ctx, spec.RunnerPool, rs, tfrunner.ApplyOptions{})
	if j == nil || j.result == nil {
		return nil, err
	}
	return driftOutcome(j, err)
}

// Busy reports whether a run of key waits for or holds a runner.
func (d *Dispatcher) Busy(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.busy[key] > 0
}

// Forget has nothing to do: runners keep no workspace after a run.
func (d *Dispatcher) Forget(string) {}

// ErroredState returns the state a runner could not save for key's last run, with that run's ID,
// if any.
func (d *Dispatcher) ErroredState(key string) (tfrunner.ErroredState, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.errored[key]
	return e, ok
}

// ClearErroredState forgets key's errored state once saved.
func (d *Dispatcher) ClearErroredState(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.errored, key)
}

// RunnerLostError is a run given up because its runner went silent or its stream broke mid-run
// (pod deleted, OOM-killed, node lost): what the run did is unknown, as after a killed process.
type RunnerLostError struct {
	Pool, Runner, Reason string
}

func (e *RunnerLostError) Error() string {
	return fmt.Sprintf("runner %s of pool %s was lost mid-run: %s", e.Runner, e.Pool, e.Reason)
}

// Unwrap is tfrunner.ErrProcessLost: creates the run started are in doubt (tfrunner.Killed).
func (e *RunnerLostError) Unwrap() error { return tfrunner.ErrProcessLost }
