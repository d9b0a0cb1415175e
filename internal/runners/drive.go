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
	msgs := make(chan received, 64)
	gen := 0
	read := func(s runnerpb.Runs_RunServer, gen int) {
		for {
			m, err := s.Recv()
			select {
			case msgs <- received{m, err, gen}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}
	go read(stream, gen)
	var current *resumed // the resumed stream in use, if any
	defer func() {
		if current != nil {
			close(current.done)
		}
	}()
	lease, fence := d.opts.HeartbeatTimeout, d.opts.HeartbeatTimeout+d.opts.FenceGrace
	lastSeen, broken := time.Now(), false
	ticker := time.NewTicker(lease / 8)
	defer ticker.Stop()
	cancel, cancelPending := j.cancel, false
	send := func(m *runnerpb.ManagerMessage) {
		if broken {
			return // the runner resumes, or the fence ends the run
		}
		if err := stream.Send(m); err != nil {
			broken = true
		}
	}
	answer := func(err error) {
		a := &runnerpb.Answer{}
		if err != nil {
			j.hookErr, a.Error = err, err.Error()
		}
		send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Answer{Answer: a}})
	}
	// An adopted run's events wait for the caller that attaches (its sink), unanswered: the run is
	// frozen meanwhile (answerWait). held is the one that waits (a resent one replaces it).
	events, sink, attached := j.opts.Events, j.sink, !j.adopted
	var held tfrunner.Event
	event := func(e tfrunner.Event) {
		if !attached {
			held = e
			return
		}
		answer(events.Send(e))
	}
	for {
		select {
		case r := <-msgs:
			if r.stream != gen {
				continue // the end of a stream the run has left
			}
			if r.err != nil {
				broken = true
				continue
			}
			lastSeen = time.Now()
			m := r.m
			switch {
			case m.GetHeartbeat() != nil:
				send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Lease{Lease: &runnerpb.Lease{
					Seq: m.GetHeartbeat().GetSeq(), ValidForMs: lease.Milliseconds()}}})
			case m.GetResult() != nil:
				return m.GetResult(), nil
			case m.GetCreateStart() != nil:
				event(tfrunner.CreateStarted{Address: m.GetCreateStart().GetAddress()})
			case m.GetApplying() != nil:
				event(tfrunner.Applying{Plan: planFromProto(m.GetApplying())})
			default:
				// Not a message this manager knows (a newer runner's, a forged one): the run is
				// stopped as a cancel stops it, and stays fenced until its Result or the fence's
				// end. Given up at once, its lock and credentials would go while its processes
				// may still run (issue 46).
				if !cancelPending {
					cancel, cancelPending = nil, true
					send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Cancel{Cancel: &runnerpb.Cancel{}}})
				}
			}
		case events = <-sink:
			attached, sink = true, nil
			if held != nil {
				e := held
				held = nil
				answer(events.Send(e))
			}
		case rs := <-j.resume:
			if current != nil {
				close(current.done)
			}
			current, stream, broken, lastSeen = &rs, rs.stream, false, time.Now()
			gen++
			go read(stream, gen)
			if j.creds != nil {
				// An adopted run: the runner may not have read them on the stream that broke.
				send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Credentials{Credentials: j.creds}})
			}
			if cancelPending {
				send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Cancel{Cancel: &runnerpb.Cancel{}}})
			}
		case <-ticker.C:
			if silent := time.Since(lastSeen); silent > fence {
				return nil, fmt.Errorf("nothing from it for %s (lease %s, fence grace %s)", silent.Round(time.Second), lease, d.opts.FenceGrace)
			}
		case <-cancel:
			cancel, cancelPending = nil, true
			send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Cancel{Cancel: &runnerpb.Cancel{}}})
		}
	}
}
