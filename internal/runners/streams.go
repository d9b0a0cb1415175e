package runners

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// The runner's side of a stream, as the manager serves it: a runner authenticates, says which pool
// it serves, and waits for a run (serveRun); a runner whose stream broke mid-run carries the run on
// over a new one (resumeRun).

// serveRun serves one Runs/Run stream: authenticate, read Hello, wait for a run of the runner's
// pool, then drive it to its Result; or, when the first message is Resume, hand the stream to the
// run it names (resumeRun).
func (d *Dispatcher) serveRun(stream runnerpb.Runs_RunServer) error {
	ctx := stream.Context()
	if d.opts.Leading != nil && !d.opts.Leading() {
		var leader string
		if d.opts.Leader != nil {
			leader = d.opts.Leader()
		}
		return notLeader(leader)
	}
	user, err := d.authenticate(ctx)
	if err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if r := first.GetResume(); r != nil {
		hello = &runnerpb.Hello{Runner: r.GetRunner(), Pool: r.GetPool()}
	}
	if hello.GetPool() == "" || hello.GetRunner() == "" {
		return status.Error(codes.InvalidArgument, "the first message must be a hello or a resume naming the runner and its pool")
	}
	if err := d.authorize(ctx, hello.Pool, user); err != nil {
		return err
	}
	d.track(hello, 1)
	defer d.track(hello, -1)
	if r := first.GetResume(); r != nil {
		return d.resumeRun(ctx, stream, r, user)
	}
	q := d.lineOf(hello.Pool)
	// A waiting stream expires: the runner opens another, whose token is reviewed again.
	waitCtx, stopWaiting := context.WithTimeout(ctx, d.opts.StreamIdle)
	j, err := q.take(waitCtx)
	stopWaiting()
	if err != nil {
		if ctx.Err() == nil {
			return status.Errorf(codes.DeadlineExceeded, "no run for %s within %s: open a new stream", hello.Pool, d.opts.StreamIdle)
		}
		return status.FromContextError(err).Err()
	}
	// Each run is authorized on its own, when it is handed over: the token may have expired or
	// the pool changed its ServiceAccount while the stream waited.
	if err := d.authorizeRun(ctx, hello.Pool, user); err != nil {
		q.handBack(j)
		return err
	}
	if feature := missingFeature(j.spec, hello); feature != "" {
		// An older runner would run without what it does not know (a plan policy unread is a
		// plan applied past its rules): the run fails here instead, and its caller says why.
		j.err = &RunnerTooOldError{Pool: hello.Pool, Runner: hello.Runner, Feature: feature}
		close(j.done)
		return status.Error(codes.FailedPrecondition, j.err.Error())
	}
	j.user, j.runner = user, hello.Runner
	if err := stream.Send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Run{Run: j.spec}}); err != nil {
		q.handBack(j)
		return err
	}
	id := j.spec.GetId()
	d.mu.Lock()
	d.live[id] = j
	d.mu.Unlock()
	d.carry(stream, j)
	return nil
}

// carry drives a live run (registered in d.live) over stream to its end and records it, for a run
// handed out (serveRun) and one adopted (adoptRun) alike: it is no longer live; a run given up is a
// *RunnerLostError (told to OnRunnerLost); an errored state its Result carries is kept under the
// run's ID before done is closed, so that its caller stores it (Router.keepErrored) before the
// run's credentials are revoked.
func (d *Dispatcher) carry(stream runnerpb.Runs_RunServer, j *job) {
	res, err := d.drive(stream, j)
	id, key := j.spec.GetId(), j.spec.GetKey()
	d.mu.Lock()
	delete(d.live, id)
	if res.GetErroredState() != nil {
		// The runner's workspace starts clean (Runner.execute): the state is this run's.
		d.errored[key] = tfrunner.ErroredState{RunID: id, State: res.GetErroredState()}
	}
	d.mu.Unlock()
	if err != nil {
		j.err = &RunnerLostError{Pool: j.pool, Runner: j.runner, Reason: err.Error()}
		if d.opts.OnRunnerLost != nil {
			d.opts.OnRunnerLost(j.pool, j.runner, key, j.err)
		}
	}
	j.result = res
	close(j.done)
}

// resumeRun hands a stream opened with Resume to the run it names, if that run is still carried
// (its fence has not ended), and returns once the run no longer uses it. A run never known here (a
// restarted manager, a new leader) is adopted when it can be (adoptRun); one of another pool, of
// another runner, or given up, is NotFound: the runner then kills what is left of it.
func (d *Dispatcher) resumeRun(ctx context.Context, stream runnerpb.Runs_RunServer, r *runnerpb.Resume, user string) error {
	d.mu.Lock()
	j := d.live[r.GetRunId()]
	d.mu.Unlock()
	// Only the runner that took the run, with the same identity, carries it on: a run id is no
	// secret (status.lastRun.id), and a result from anyone else would be a forgery.
	if j == nil {
		// Started by a predecessor, perhaps: adopted when Adopt vouches for it.
		return d.adoptRun(ctx, stream, r, user)
	}
	if j.pool != r.GetPool() || r.GetRunId() == "" || j.user != user || j.runner != r.GetRunner() {
		return status.Errorf(codes.NotFound, "run %q is not carried by this manager (given up, or started by another)", r.GetRunId())
	}
	rs := resumed{stream: stream, done: make(chan struct{})}
	select {
	case j.resume <- rs:
	case <-j.done:
		return status.Errorf(codes.NotFound, "run %q has ended", r.GetRunId())
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-rs.done:
	case <-ctx.Done():
	}
	return nil
}

// authorize checks that user may serve pool (DispatcherOptions.Authorize).
func (d *Dispatcher) authorize(ctx context.Context, pool, user string) error {
	if d.opts.Authorize == nil {
		return nil
	}
	if err := d.opts.Authorize(ctx, pool, user); err != nil {
		return status.Errorf(codes.PermissionDenied, "%s may not serve pool %s: %v", user, pool, err)
	}
	return nil
}

// authorizeRun checks, as a run is handed over on a stream that may have waited, that the
// stream's token still authenticates as user and that user may still serve pool.
func (d *Dispatcher) authorizeRun(ctx context.Context, pool, user string) error {
	again, err := d.authenticate(ctx)
	if err != nil {
		return err
	}
	if again != user {
		return status.Errorf(codes.PermissionDenied, "the stream's token now names %s, not %s", again, user)
	}
	return d.authorize(ctx, pool, user)
}

// track counts the runner's open streams (one per run it can take or holds).
func (d *Dispatcher) track(h *runnerpb.Hello, delta int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rs := d.runners[h.Pool]
	if rs == nil {
		rs = map[string]int{}
		d.runners[h.Pool] = rs
	}
	if rs[h.Runner] += delta; rs[h.Runner] <= 0 {
		delete(rs, h.Runner)
	}
}

// FeaturePlanPolicy is the Hello feature of a runner that evaluates Gate.policy (issue 49).
const FeaturePlanPolicy = "plan-policy"

// missingFeature names a feature run spec needs that the runner's hello does not list ("" when
// none): FeaturePlanPolicy for a gate with rules.
func missingFeature(spec *runnerpb.RunSpec, hello *runnerpb.Hello) string {
	if len(spec.GetGate().GetPolicy()) > 0 && !slices.Contains(hello.GetFeatures(), FeaturePlanPolicy) {
		return FeaturePlanPolicy
	}
	return ""
}

// RunnerTooOldError is a run not given to the runner that took it, which lacks a feature the run
// needs (its image is older than the manager's).
type RunnerTooOldError struct {
	Pool, Runner, Feature string
}

func (e *RunnerTooOldError) Error() string {
	return fmt.Sprintf("runner %s of pool %s is older than this manager: it does not support %s (the class's plan rules), so it was not given the run; update the pool's runner image", e.Runner, e.Pool, e.Feature)
}
