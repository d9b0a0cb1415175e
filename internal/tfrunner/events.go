package tfrunner

import "github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"

// Event is what a run tells its caller while it goes on: one of Queued, Started, CreateStarted,
// Applying.
// Events are typed messages, the same in-process and over the run protocol (package runners).
type Event interface{ isEvent() }

// Queued: the run waits for a slot; Position is its place in line (1 = next) among Waiting runs.
// Told once, after the run has waited QueuedAfter. Informational: its error is ignored.
type Queued struct{ Position, Waiting int }

// Started: the run has its slot and runs its first command once the sink returned; an error stops
// it before that (ErrStopped). The pool that hands runs to runner pods tells it before the run is
// queued (its runner's first command follows the hand-over, which the caller does not see).
type Started struct{}

// CreateStarted: Terraform started creating the object at module address Address (apply_start).
// The apply reads its next event only once the sink returned; an error interrupts the apply (the
// caller could not record it durably).
type CreateStarted struct{ Address string }

// Applying: the Gate let saved plan Plan through and it is applied next. The apply starts only
// once the sink returned; an error stops the run before it (ErrStopped).
type Applying struct{ Plan *tfjson.Plan }

func (Queued) isEvent()        {}
func (Started) isEvent()       {}
func (CreateStarted) isEvent() {}
func (Applying) isEvent()      {}

// Events receives a run's events, in order, on the run's goroutine. nil drops them.
type Events func(Event) error

// Send delivers e to f; nil when f is nil.
func (f Events) Send(e Event) error {
	if f == nil {
		return nil
	}
	return f(e)
}

// createStarts adapts f to the stream readers' per-address callback (nil when f is nil).
func (f Events) createStarts() tfjson.CreateStartFunc {
	if f == nil {
		return nil
	}
	return func(address string) error { return f(CreateStarted{Address: address}) }
}

// QueuedFunc adapts f to NotifyQueued's callback (nil when f is nil).
func (f Events) QueuedFunc() func(position, waiting int) {
	if f == nil {
		return nil
	}
	return func(position, waiting int) { _ = f(Queued{Position: position, Waiting: waiting}) }
}
