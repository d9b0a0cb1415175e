package runners

import (
	"context"
	"fmt"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// resumed is a stream a runner opened with Resume for a run it carries: drive carries the run on
// over it and closes done once it no longer uses it (its handler then returns).
type resumed struct {
	stream runnerpb.Runs_RunServer
	done   chan struct{}
}

// received is one message of a run's stream, or the stream's end, tagged with the stream it came
// from (a broken stream's last reads are told from the resumed one's).
type received struct {
	m      *runnerpb.RunnerMessage
	err    error
	stream int
}

// drive runs the manager's side of one run, a lease the runner renews: it answers each heartbeat
// with a Lease valid for the heartbeat timeout, hands the runner's events to the caller's Events
// sink and answers each with the sink's verdict, passes the caller's cancel on, and returns the
// runner's Result.
//
// A run is fenced: it is given up (an error, no result) only once nothing came from its runner for
// the heartbeat timeout plus the fence grace, whether its stream broke or went silent. Until then
// a message on the stream, or a stream the runner opens with Resume, carries the run on: the
// runner froze its run when its lease expired and kills it before the fence ends, so a run given
// up here has stopped, and only then are its lock and credentials released (by the caller).
func (d *Dispatcher) drive(stream runnerpb.Runs_RunServer, j *job) (*runnerpb.Result, error) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	v := &driver{ctx: ctx, j: j, msgs: make(chan received, 64), stream: stream, lastSeen: time.Now(),
		lease: d.opts.HeartbeatTimeout, leading: d.opts.Leading, cancel: j.cancel,
		events: j.opts.Events, sink: j.sink, attached: !j.adopted}
	go v.read(stream, v.gen)
	defer func() {
		if v.current != nil {
			close(v.current.done)
		}
	}()
	fence := d.opts.HeartbeatTimeout + d.opts.FenceGrace
	ticker := time.NewTicker(v.lease / 8)
	defer ticker.Stop()
	for {
		select {
		case r := <-v.msgs:
			if res, done := v.receive(r); done {
				return res, nil
			}
		case events := <-v.sink:
			v.attach(events)
		case rs := <-j.resume:
			v.resume(rs)
		case <-ticker.C:
			if silent := time.Since(v.lastSeen); silent > fence {
				return nil, fmt.Errorf("nothing from it for %s (lease %s, fence grace %s)", silent.Round(time.Second), v.lease, d.opts.FenceGrace)
			}
		case <-v.cancel:
			v.stopRun()
		}
	}
}

// driver is drive's state for one run: the stream in use (a resumed one replaces a broken one),
// when the runner was last heard from, the cancel passed on, and the caller's Events sink, which
// an adopted run waits for (its events held, unanswered, until a caller attaches).
type driver struct {
	ctx      context.Context // ends the stream readers when drive returns
	j        *job
	msgs     chan received
	gen      int // the stream in use: received messages of another are a left stream's
	stream   runnerpb.Runs_RunServer
	current  *resumed // the resumed stream in use, if any
	lastSeen time.Time
	broken   bool // the stream in use failed: nothing is sent until the runner resumes
	lease    time.Duration
	leading  func() bool // DispatcherOptions.Leading: no lease is granted while it says false

	cancel        <-chan struct{} // the caller's cancel, nil once passed on
	cancelPending bool            // a Cancel was sent (again on each resumed stream)

	events   tfrunner.Events
	sink     <-chan tfrunner.Events // the sink of the caller that attaches, for an adopted run
	attached bool
	held     tfrunner.Event // the event an unattached run waits on (a resent one replaces it)
}

// read passes stream s's messages, tagged gen, to msgs until it ends or drive returns.
func (v *driver) read(s runnerpb.Runs_RunServer, gen int) {
	for {
		m, err := s.Recv()
		select {
		case v.msgs <- received{m, err, gen}:
		case <-v.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// send sends m on the stream in use; a failed send marks it broken (the runner resumes, or the
// fence ends the run).
func (v *driver) send(m *runnerpb.ManagerMessage) {
	if v.broken {
		return
	}
	if err := v.stream.Send(m); err != nil {
		v.broken = true
	}
}

// answer answers the event that waits with the sink's verdict err (nil: go on).
func (v *driver) answer(err error) {
	a := &runnerpb.Answer{}
	if err != nil {
		v.j.hookErr, a.Error = err, err.Error()
	}
	v.send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Answer{Answer: a}})
}

// event hands e to the caller's sink and answers the runner, or holds it until a caller attaches.
func (v *driver) event(e tfrunner.Event) {
	if !v.attached {
		v.held = e
		return
	}
	v.answer(v.events.Send(e))
}

// attach takes the sink of the caller that attached to an adopted run and answers the event held.
func (v *driver) attach(events tfrunner.Events) {
	v.events, v.attached, v.sink = events, true, nil
	if v.held != nil {
		e := v.held
		v.held = nil
		v.answer(v.events.Send(e))
	}
}

// receive handles one message of a stream: a heartbeat is answered with a Lease valid for the
// heartbeat timeout while this manager leads (a replica that lost its leadership grants none: the
// runner freezes its run when the lease it has runs out and kills it within its freeze, before the
// next leader's fence ends), events go to the sink, and a Result ends the run (done). A message this
// manager does not know stops the run as a cancel does.
func (v *driver) receive(r received) (res *runnerpb.Result, done bool) {
	if r.stream != v.gen {
		return nil, false // the end of a stream the run has left
	}
	if r.err != nil {
		v.broken = true
		return nil, false
	}
	v.lastSeen = time.Now()
	m := r.m
	switch {
	case m.GetHeartbeat() != nil:
		if v.leading != nil && !v.leading() {
			return nil, false
		}
		v.send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Lease{Lease: &runnerpb.Lease{
			Seq: m.GetHeartbeat().GetSeq(), ValidForMs: v.lease.Milliseconds()}}})
	case m.GetResult() != nil:
		return m.GetResult(), true
	case m.GetCreateStart() != nil:
		v.event(tfrunner.CreateStarted{Address: m.GetCreateStart().GetAddress()})
	case m.GetApplying() != nil:
		v.event(tfrunner.Applying{Plan: planFromProto(m.GetApplying())})
	default:
		// Not a message this manager knows (a newer runner's, a forged one): the run is stopped
		// as a cancel stops it, and stays fenced until its Result or the fence's end. Given up at
		// once, its lock and credentials would go while its processes may still run (issue 46).
		if !v.cancelPending {
			v.stopRun()
		}
	}
	return nil, false
}

// resume carries the run on over a stream the runner opened with Resume: credentials again for
// an adopted run (the runner may not have read them on the stream that broke), and the cancel
// again when one was sent.
func (v *driver) resume(rs resumed) {
	if v.current != nil {
		close(v.current.done)
	}
	v.current, v.stream, v.broken, v.lastSeen = &rs, rs.stream, false, time.Now()
	v.gen++
	go v.read(v.stream, v.gen)
	if v.j.creds != nil {
		v.send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Credentials{Credentials: v.j.creds}})
	}
	if v.cancelPending {
		v.send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Cancel{Cancel: &runnerpb.Cancel{}}})
	}
}

// stopRun passes a cancel on to the runner, once.
func (v *driver) stopRun() {
	v.cancel, v.cancelPending = nil, true
	v.send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Cancel{Cancel: &runnerpb.Cancel{}}})
}
