package runners

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// drive runs the manager's side of one run on its stream: it answers the runner's hook requests
// with the caller's hooks, passes the caller's cancel on, and returns the runner's Result. It
// returns an error, and no result, when the runner is lost first: its stream broke or it sent
// nothing (not even a heartbeat) for the heartbeat timeout.
func (d *Dispatcher) drive(ctx context.Context, stream grpc.ServerStream, j *job) (*Result, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var lastSeen atomic.Int64
	lastSeen.Store(time.Now().UnixNano())
	// One ordered channel for messages and the stream's end: a Result followed at once by the
	// runner's CloseSend is always read before the end.
	type received struct {
		m   *RunnerMessage
		err error
	}
	msgs := make(chan received, 64)
	go func() {
		for {
			m := &RunnerMessage{}
			err := stream.RecvMsg(m)
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
	next := func() (*RunnerMessage, error) {
		for {
			select {
			case r := <-msgs:
				if r.err != nil {
					return nil, fmt.Errorf("its stream ended: %w", r.err)
				}
				if r.m.Heartbeat == nil {
					return r.m, nil
				}
			case <-ticker.C:
				if silent := time.Since(time.Unix(0, lastSeen.Load())); silent > timeout {
					return nil, fmt.Errorf("no heartbeat for %s (timeout %s)", silent.Round(time.Second), timeout)
				}
			case <-cancel:
				cancel = nil
				if err := stream.SendMsg(&ManagerMessage{Cancel: true}); err != nil {
					return nil, fmt.Errorf("sending cancel: %w", err)
				}
			}
		}
	}
	answer := func(err error) error {
		a := &Answer{}
		if err != nil {
			j.hookErr, a.Error = err, err.Error()
		}
		return stream.SendMsg(&ManagerMessage{Answer: a})
	}
	for {
		m, err := next()
		if err != nil {
			return nil, err
		}
		switch {
		case m.Result != nil:
			return m.Result, nil
		case m.Schema != nil:
			err = answer(callCheck(j.opts.Check, m.Schema))
		case m.CreateStart != nil:
			err = answer(callCreateStart(j.opts.OnCreateStart, m.CreateStart.Address))
		case m.Plan != nil:
			render := func() (string, error) {
				if err := stream.SendMsg(&ManagerMessage{Render: true}); err != nil {
					return "", err
				}
				r, err := next()
				if err != nil {
					return "", err
				}
				if r.Rendered == nil {
					return "", errors.New("the runner answered a render request with something else")
				}
				if r.Rendered.Error != "" {
					return r.Rendered.Text, errors.New(r.Rendered.Error)
				}
				return r.Rendered.Text, nil
			}
			err = answer(callBeforeApply(j.opts.BeforeApply, m.Plan, render))
		default:
			err = errors.New("unexpected message from the runner")
		}
		if err != nil {
			return nil, err
		}
	}
}

func callCheck(f func(*tfrunner.ModuleSchema) error, s *tfrunner.ModuleSchema) error {
	if f == nil {
		return nil
	}
	return f(s)
}

func callCreateStart(f tfrunner.CreateStartFunc, addr string) error {
	if f == nil {
		return nil
	}
	return f(addr)
}

func callBeforeApply(f func(*tfrunner.Plan, func() (string, error)) error, p *tfrunner.Plan, render func() (string, error)) error {
	if f == nil {
		return nil
	}
	return f(p, render)
}
