package queue

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A drained run's context outlives its parent's cancellation and ends at the drain's deadline; a
// run waiting for a slot when the drain begins is refused, and none starts afterwards.
func TestDrainDetachesRunsAndRefusesWaitingOnes(t *testing.T) {
	d := NewDrain()
	parent, cancel := context.WithCancel(context.Background())
	run, release := d.Detach(parent)
	defer release()
	cancel()
	select {
	case <-run.Done():
		t.Fatal("a detached context ended with its parent")
	case <-time.After(50 * time.Millisecond):
	}

	slots := NewSlots(1)
	if err := slots.Acquire(context.Background(), "a", nil); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		ctx, stop := d.UntilBegun(context.Background())
		defer stop()
		waited <- slots.Acquire(ctx, "b", nil)
	}()
	time.Sleep(50 * time.Millisecond)
	d.Begin(200 * time.Millisecond)
	if err := <-waited; err == nil {
		t.Fatal("a run waiting for a slot got one after the drain began")
	}
	if !d.Draining() {
		t.Fatal("Draining is false after Begin")
	}
	select {
	case <-run.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the detached context did not end at the drain's deadline")
	}
	if !errors.Is(ErrDraining, context.Canceled) {
		t.Fatal("ErrDraining does not wrap context.Canceled")
	}
	var never *Drain
	if same, _ := never.Detach(parent); never.Draining() || same != parent {
		t.Fatal("a nil Drain is not a no-op")
	}
}
