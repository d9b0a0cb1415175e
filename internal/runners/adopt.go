package runners

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// A run on a runner pool outlives the manager that started it: when that manager dies (SIGKILL,
// OOM, its node lost), the runner freezes the run and resumes it, through the Service, on whichever
// replica leads next. That leader did not start the run and knows neither its credentials nor its
// caller; it adopts it (adoptRun) when DispatcherOptions.Adopt vouches for it — the resource's
// status records it as its last run, still Running, on that pool — with new state credentials,
// which the runner's state proxy puts in place of the run's own. The run then goes on under a lease
// from this manager; its events wait (the run is frozen past answerWait) until the resource's
// reconcile attaches to it (Attach) and records them, and its Result goes to that reconcile as a
// run's own outcome. The controller learns of the run from Resumed, a channel: the dispatcher
// calls nothing of it. A run nobody attaches to within AdoptWait is cancelled.

// AdoptRequest names a run a runner resumed that this manager did not start.
type AdoptRequest struct {
	// RunID and Key are the run's (RunSpec); Pool and Runner the runner's, as authorized.
	RunID, Key, Pool, Runner string
	// Operation is the run's: "apply", "destroy" or "drift-check" (as logs name it).
	Operation string
}

// Adoption is what the manager grants a run it adopts: the state credentials it issued for the run
// (HTTP basic auth of the state server) and their revoke, called once the run's processes have
// exited.
type Adoption struct {
	Username, Password string
	Revoke             func()
}

// adoptRun adopts the run a runner resumed on stream that this manager does not carry, when
// DispatcherOptions.Adopt vouches for it, and drives it to its Result as serveRun drives the runs it
// hands out; otherwise it answers NotFound, and the runner kills the run. It returns once the run
// no longer uses the stream.
func (d *Dispatcher) adoptRun(ctx context.Context, stream runnerpb.Runs_RunServer, r *runnerpb.Resume, user string) error {
	id, key := r.GetRunId(), r.GetKey()
	if d.opts.Adopt == nil || id == "" || key == "" {
		return status.Errorf(codes.NotFound, "run %q is not carried by this manager (given up, or started by another)", id)
	}
	// One run of a key at a time: a run of the key this manager started or adopted is under way.
	d.mu.Lock()
	if d.busy[key] > 0 || d.adopted[id] != nil {
		// A run of the key under way, or this very run adopted already (its Result, sent again
		// on a stream that broke before the manager ended it, was taken).
		d.mu.Unlock()
		return status.Errorf(codes.NotFound, "run %q is not adopted: a run of %s is under way or was adopted here", id, key)
	}
	d.busy[key]++
	d.adopting[id] = true // until it waits for a caller, or is not adopted after all (attach waits)
	d.running.Add(1)
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.busy[key]--; d.busy[key] <= 0 {
			delete(d.busy, key)
		}
		delete(d.adopting, id)
		d.mu.Unlock()
		d.running.Done()
	}()
	a, err := d.opts.Adopt(ctx, AdoptRequest{RunID: id, Key: key, Pool: r.GetPool(), Runner: r.GetRunner(), Operation: opName(r.GetOp())})
	if err != nil {
		return status.Errorf(codes.NotFound, "run %q is not adopted by this manager: %v", id, err)
	}
	j := &job{pool: r.GetPool(), user: user, runner: r.GetRunner(),
		spec:   &runnerpb.RunSpec{Id: id, Op: r.GetOp(), Key: key},
		cancel: make(chan struct{}), done: make(chan struct{}), resume: make(chan resumed),
		adopted: true, sink: make(chan tfrunner.Events, 1), revoke: a.Revoke,
		creds: &runnerpb.Credentials{Username: a.Username, Password: a.Password, StateUrl: d.opts.StateURL}}
	if err := stream.Send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Credentials{Credentials: j.creds}}); err != nil {
		a.Revoke()
		return err
	}
	d.mu.Lock()
	d.live[id], d.adopted[id] = j, j
	delete(d.adopting, id)
	d.mu.Unlock()
	select {
	case d.resumed <- key:
	default: // the controller has not read the keys before: its fence's requeue comes for this one
	}
	// Not stopped when the run ends: a run that ended with no caller attached is revoked then.
	time.AfterFunc(d.opts.AdoptWait, func() { d.expireAdoption(j) })
	d.carry(stream, j)
	return nil
}

// Resumed delivers the key of each run adopted here (a run a runner resumed after this manager's
// predecessor started it), so that the controller reconciles that key now and attaches to the run
// (Attach), not when its requeue comes. It holds up to 256 keys nobody read; later ones are
// dropped (the controller's runner fence requeues the resource anyway, see adopt.go). One channel
// for the Dispatcher's life; never closed.
func (d *Dispatcher) Resumed() <-chan string { return d.resumed }

// adoptingWait bounds how long attach waits for an adoption under way (the Adopt call and the
// credentials' send).
const adoptingWait = 10 * time.Second

// errNotAttached answers the events of an adopted run whose adoption expired: the run stops there.
var errNotAttached = errors.New("no reconcile attached to the adopted run in time: it is cancelled")

// expireAdoption cancels an adopted run that no caller attached to within AdoptWait (its resource
// was deleted meanwhile, or started another run): its events are refused (one that waits, too,
// else the run would wait for its answer forever) and Terraform gets SIGINT. Once the run ended
// (at once, for a run that ended already) its errored state is stored (DispatcherOptions.KeepErrored)
// and then its credentials are revoked, which releases its lock.
func (d *Dispatcher) expireAdoption(j *job) {
	id, key := j.spec.GetId(), j.spec.GetKey()
	d.mu.Lock()
	if j.claimed {
		d.mu.Unlock()
		return
	}
	j.claimed = true
	if d.adopted[id] == j {
		delete(d.adopted, id)
	}
	d.mu.Unlock()
	j.sink <- func(tfrunner.Event) error { return errNotAttached }
	close(j.cancel)
	<-j.done
	if d.opts.KeepErrored != nil {
		d.mu.Lock()
		e, ok := d.errored[key]
		d.mu.Unlock()
		if ok && e.RunID == id {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := d.opts.KeepErrored(ctx, id, e.State); err == nil {
				d.ClearErroredState(key)
			}
			cancel()
		}
	}
	j.revoke()
}

// Adopted reports whether the run runID of key was adopted here and waits for its caller (Attach).
func (d *Dispatcher) Adopted(key, runID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.adopted[runID]
	return j != nil && j.spec.GetKey() == key
}

// attach makes the caller of an apply the caller of the adopted run runID of key: events go to
// events from now on (those that waited first), and attach returns once the run has its Result,
// with the job and the revoke of the run's credentials (the caller's to call, once it stored the
// run's errored state). A ctx done first cancels the run, as it would a run the caller started.
// ok is false when no such run waits for a caller here.
func (d *Dispatcher) attach(ctx context.Context, key, runID string, events tfrunner.Events) (j *job, revoke func(), ok bool) {
	// A run being adopted this very moment (its credentials issued, the runner not told yet) is
	// waited for: a caller that went on would start a second run beside it.
	deadline := time.Now().Add(adoptingWait)
	d.mu.Lock()
	for d.adopting[runID] && d.adopted[runID] == nil && time.Now().Before(deadline) {
		d.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		d.mu.Lock()
	}
	j = d.adopted[runID]
	if j == nil || j.claimed || j.spec.GetKey() != key {
		d.mu.Unlock()
		return nil, nil, false
	}
	j.claimed = true
	delete(d.adopted, runID)
	d.mu.Unlock()
	j.sink <- events
	select {
	case <-j.done:
	case <-ctx.Done():
		close(j.cancel)
		<-j.done
	}
	return j, j.revoke, true
}

// AttachApply is attach for an apply: the adopted run's outcome as Apply returns it, and the
// revoke of its credentials; ok false when no such run waits here.
func (d *Dispatcher) AttachApply(ctx context.Context, key, runID string, opts tfrunner.ApplyOptions) (out *tfrunner.ApplyResult, revoke func(), ok bool, err error) {
	j, revoke, ok := d.attach(ctx, key, runID, opts.Events)
	if !ok {
		return nil, nil, false, nil
	}
	if j.err != nil {
		return &tfrunner.ApplyResult{}, revoke, true, j.err
	}
	out, err = applyOutcome(j, errorFromProto(j.result.GetError(), j.hookErr))
	return out, revoke, true, err
}
