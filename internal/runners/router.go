package runners

import (
	"context"
	"errors"
	"fmt"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// Router sends each run to where its spec says: Spec.RunnerPool "" to Local, the manager's
// in-process pool, any other to Remote's runners. It implements the controller's Runs, and keeps
// what the two carriers differ in behind it: a state a run could not save (Terraform's
// errored.tfstate, in the in-process workspace or in a runner's Result) goes to KeepErrored as
// soon as the run returns, the same way from either carrier, and a run of a key whose errored
// state is not stored yet does not start.
type Router struct {
	Local  *tfrunner.Pool
	Remote *Dispatcher
	// KeepErrored stores a run's errored state, identified by the run's ID (Spec.RunID), before
	// the run's state credentials are revoked: statebackend.Server.KeepErrored, which keeps it as
	// the state's pending state until it is written back. Nil leaves errored states where the
	// carriers keep them (a workspace file, the dispatcher's memory): only for runs without the
	// state server.
	KeepErrored func(ctx context.Context, runID string, state []byte) error
}

// ErrStateNotKept is tfrunner.ErrStateNotKept: a run whose errored state could not be stored.
var ErrStateNotKept = tfrunner.ErrStateNotKept

func (r *Router) remote(spec tfrunner.Spec) bool { return spec.RunnerPool != "" && r.Remote != nil }

// Apply: see tfrunner.Pool.Apply and Dispatcher.Apply.
func (r *Router) Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error) {
	if err := r.keepErrored(ctx, key); err != nil {
		return nil, err
	}
	var out *tfrunner.ApplyResult
	var err error
	if r.remote(spec) {
		out, err = r.Remote.Apply(ctx, key, spec, opts)
	} else {
		out, err = r.Local.Apply(ctx, key, spec, opts)
	}
	return out, errors.Join(err, r.keepErrored(ctx, key))
}

// Attach carries on, as its caller, the apply runID of key that a runner resumed here after this
// manager's predecessor started it, and that Remote adopted (see adopt.go): opts.Events gets the
// run's events from now on, and the run's outcome comes back as Apply's would, its errored state
// stored (KeepErrored) before its credentials are revoked. attached is false, and nothing is done,
// when no such run waits for a caller here.
func (r *Router) Attach(ctx context.Context, key, runID string, opts tfrunner.ApplyOptions) (out *tfrunner.ApplyResult, attached bool, err error) {
	if r.Remote == nil {
		return nil, false, nil
	}
	out, revoke, ok, err := r.Remote.AttachApply(ctx, key, runID, opts)
	if !ok {
		return nil, false, nil
	}
	defer revoke()
	return out, true, errors.Join(err, r.keepErrored(ctx, key))
}

// Resumed delivers the keys of runs Remote adopted (Dispatcher.Resumed), to Attach to; nil (a
// channel nothing is sent on) without Remote: in-process runs die with their manager.
func (r *Router) Resumed() <-chan string {
	if r.Remote == nil {
		return nil
	}
	return r.Remote.Resumed()
}

// Destroy: see tfrunner.Pool.Destroy and Dispatcher.Destroy.
func (r *Router) Destroy(ctx context.Context, key string, spec tfrunner.Spec) error {
	if err := r.keepErrored(ctx, key); err != nil {
		return err
	}
	var err error
	if r.remote(spec) {
		err = r.Remote.Destroy(ctx, key, spec)
	} else {
		err = r.Local.Destroy(ctx, key, spec)
	}
	return errors.Join(err, r.keepErrored(ctx, key))
}

// DriftCheck: see tfrunner.Pool.DriftCheck and Dispatcher.DriftCheck. A drift check writes no
// state (-lock=false, read-only plan).
func (r *Router) DriftCheck(ctx context.Context, key string, spec tfrunner.Spec) (*tfjson.StreamResult, error) {
	if r.remote(spec) {
		return r.Remote.DriftCheck(ctx, key, spec)
	}
	return r.Local.DriftCheck(ctx, key, spec)
}

// keepErrored stores the errored state a run of key left in either carrier (KeepErrored) under
// the ID of the run that produced it (tfrunner.ErroredState.RunID, never the ID of the run about
// to start or just ended: before a run, a state left there is an earlier run's), with a context a
// shutdown does not cancel, and clears it there once stored. It returns an error wrapping
// ErrStateNotKept when there is one and it could not be stored (the next run of key does not
// start until it is). A state the server refuses as not its run's (a
// *statebackend.ErroredStateRefusedError: another run wrote since, or its run's lock is gone) is
// dropped from the carrier and the refusal returned once, wrapping ErrStateNotKept so that the
// creates of its run stay in doubt; the key's next run starts.
func (r *Router) keepErrored(ctx context.Context, key string) error {
	if r.KeepErrored == nil {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	if e, ok := r.Local.ErroredState(key); ok {
		if err := r.keepOne(ctx, e, "errored.tfstate in the workspace of "+key, r.Local.ClearErroredState, key); err != nil {
			return err
		}
	}
	if r.Remote == nil {
		return nil
	}
	if e, ok := r.Remote.ErroredState(key); ok {
		if err := r.keepOne(ctx, e, "sent by the runner of "+key, r.Remote.ClearErroredState, key); err != nil {
			return err
		}
	}
	return nil
}

// keepOne stores e (found where from says) and clears it with clear once stored or refused.
func (r *Router) keepOne(ctx context.Context, e tfrunner.ErroredState, from string, clear func(string), key string) error {
	err := r.KeepErrored(ctx, e.RunID, e.State)
	var refused *statebackend.ErroredStateRefusedError
	switch {
	case errors.As(err, &refused):
		// Dropped: the objects it holds are in no stored state, so its run's creates stay in
		// doubt (ErrStateNotKept keeps them), but the key's runs go on.
		clear(key)
		return fmt.Errorf("%w: %w; dropped (%s)", ErrStateNotKept, err, from)
	case err != nil:
		return fmt.Errorf("%w (%s): %w", ErrStateNotKept, from, err)
	}
	clear(key)
	return nil
}
