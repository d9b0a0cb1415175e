package queue

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// ErrDraining is the error of a run refused because its carrier is draining (Drain.Begin): it
// waited for a slot or a runner and never started. It wraps context.Canceled, so a caller records
// it as a run cancelled by a shutdown.
var ErrDraining = fmt.Errorf("the controller is shutting down and starts no run: %w", context.Canceled)

// Drain is a shutdown that lets started runs finish. Before Begin nothing changes. Begin stops
// starting runs: a run that waits for a slot or a runner is refused with ErrDraining, and one
// handed a slot after Begin starts no command. Runs already started go on with contexts made by
// Detach, which are cancelled only at Interrupt (Terraform then gets SIGINT, then SIGKILL after
// the grace period), or when the deadline Begin set passes.
//
// This is the drain of kubelet's pod termination (SIGTERM, then terminationGracePeriodSeconds)
// applied to Terraform runs: an apply interrupted mid-create leaves a create in doubt, so a
// rollout waits for applies rather than interrupting them. A nil *Drain never begins.
type Drain struct {
	once  sync.Once
	begun chan struct{}
	// stop is done at Interrupt; every Detach context is done with it.
	stop      context.Context
	interrupt context.CancelFunc
}

// NewDrain returns a Drain that has not begun.
func NewDrain() *Drain {
	stop, cancel := context.WithCancel(context.Background())
	return &Drain{begun: make(chan struct{}), stop: stop, interrupt: cancel}
}

// Begin stops starting runs and interrupts those under way once timeout (a duration; 0 or less:
// at once) has passed. Only the first call counts.
func (d *Drain) Begin(timeout time.Duration) {
	if d == nil {
		return
	}
	d.once.Do(func() {
		close(d.begun)
		if timeout <= 0 {
			d.interrupt()
			return
		}
		time.AfterFunc(timeout, d.interrupt)
	})
}

// Interrupt begins the drain if it has not begun and cancels every Detach context now.
func (d *Drain) Interrupt() {
	if d == nil {
		return
	}
	d.Begin(0)
	d.interrupt()
}

// Begun is closed once Begin was called; nil (never closed) for a nil Drain.
func (d *Drain) Begun() <-chan struct{} {
	if d == nil {
		return nil
	}
	return d.begun
}

// Draining reports whether Begin was called.
func (d *Drain) Draining() bool {
	select {
	case <-d.Begun():
		return true
	default:
		return false
	}
}

// Detach returns a context with ctx's values that is not cancelled when ctx is (a shutdown
// cancels the reconciles' contexts at once) but at Interrupt, and the func that releases it (call
// it when the work ends: it cancels the context and unregisters it from the drain). A nil Drain
// returns ctx itself.
func (d *Drain) Detach(ctx context.Context) (context.Context, context.CancelFunc) {
	if d == nil {
		return ctx, func() {}
	}
	out, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unregister := context.AfterFunc(d.stop, cancel)
	return out, func() { unregister(); cancel() }
}

// UntilBegun returns a context done when ctx is or when the drain begins: what a run waits for a
// slot or a runner with.
func (d *Drain) UntilBegun(ctx context.Context) (context.Context, context.CancelFunc) {
	out, cancel := context.WithCancel(ctx)
	if d == nil {
		return out, cancel
	}
	stop := make(chan struct{})
	go func() {
		select {
		case <-d.begun:
			cancel()
		case <-stop:
		}
	}()
	return out, func() { close(stop); cancel() }
}
