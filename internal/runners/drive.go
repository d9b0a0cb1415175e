package runners

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// drive runs the manager's side of one run on its stream: it hands the runner's events to the
// caller's Events sink and answers each with the sink's verdict, passes the caller's cancel on, and returns the runner's Result. It
// returns an error, and no result, when the runner is lost first: its stream broke or it sent
// nothing (not even a heartbeat) for the heartbeat timeout.
func (d *Dispatcher) drive(ctx context.Context, stream runnerpb.Runs_RunServer, j *job) (*runnerpb.Result, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var lastSeen atomic.Int64
	lastSeen.Store(time.Now().UnixNano())
	// One ordered channel for messages and the stream's end: a Result followed at once by the
	// runner's CloseSend is always read before the end.
	type received struct {
		m   *runnerpb.RunnerMessage
		err error
	}
	msgs := make(chan received, 64)
	go func() {
		for {
			m, err := stream.Recv()
			if err == nil {
				lastSeen.Store(time.Now().UnixNano())
			}
			select {
			case msgs <- received{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	timeout := d.opts.HeartbeatTimeout
	ticker := time.NewTicker(timeout / 4)
	defer ticker.Stop()
	cancel := j.cancel
	// next returns the next message other than a heartbeat, or why the runner is lost.
	next := func() (*runnerpb.RunnerMessage, error) {
		for {
			select {
			case r := <-msgs:
				if r.err != nil {
					return nil, fmt.Errorf("its stream ended: %w", r.err)
				}
				if r.m.GetHeartbeat() == nil {
					return r.m, nil
				}
			case <-ticker.C:
				if silent := time.Since(time.Unix(0, lastSeen.Load())); silent > timeout {
					return nil, fmt.Errorf("no heartbeat for %s (timeout %s)", silent.Round(time.Second), timeout)
				}
			case <-cancel:
				cancel = nil
				if err := stream.Send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Cancel{Cancel: &runnerpb.Cancel{}}}); err != nil {
					return nil, fmt.Errorf("sending cancel: %w", err)
				}
			}
		}
	}
	answer := func(err error) error {
		a := &runnerpb.Answer{}
		if err != nil {
			j.hookErr, a.Error = err, err.Error()
		}
		return stream.Send(&runnerpb.ManagerMessage{Message: &runnerpb.ManagerMessage_Answer{Answer: a}})
	}
	for {
		m, err := next()
		if err != nil {
			return nil, err
		}
		switch {
		case m.GetResult() != nil:
			return m.GetResult(), nil
		case m.GetCreateStart() != nil:
			err = answer(j.opts.Events.Send(tfrunner.CreateStarted{Address: m.GetCreateStart().GetAddress()}))
		case m.GetApplying() != nil:
			err = answer(j.opts.Events.Send(tfrunner.Applying{Plan: planFromProto(m.GetApplying())}))
		default:
			err = errors.New("unexpected message from the runner")
		}
		if err != nil {
			return nil, err
		}
	}
}
