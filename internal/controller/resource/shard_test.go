package resource

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A run still waiting for its slot when the bucket begins to be handed over gives its place up
// (its context ends with errHandedOver, and a late Started is refused); one that started first
// runs on whatever the handover.
func TestRunGivesItsPlaceUpOnHandover(t *testing.T) {
	t.Run("waiting", func(t *testing.T) {
		handover := make(chan struct{})
		s := &resourceScope{handover: handover}
		ctx, stop := s.untilHandover(context.Background())
		defer stop()
		close(handover)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("the waiting run's context did not end at the handover")
		}
		if !errors.Is(context.Cause(ctx), errHandedOver) {
			t.Errorf("cause %v, want errHandedOver", context.Cause(ctx))
		}
		if err := s.startRun(); !errors.Is(err, errHandedOver) {
			t.Errorf("Started after the handover: %v, want errHandedOver", err)
		}
		if err := s.handedOver(ctx.Err()); !errors.Is(err, errHandedOver) || !errors.Is(err, context.Canceled) {
			t.Errorf("the run's error is %v, want errHandedOver (a cancellation)", err)
		}
	})
	t.Run("started", func(t *testing.T) {
		handover := make(chan struct{})
		s := &resourceScope{handover: handover}
		ctx, stop := s.untilHandover(context.Background())
		defer stop()
		if err := s.startRun(); err != nil {
			t.Fatal(err)
		}
		close(handover)
		time.Sleep(100 * time.Millisecond)
		if ctx.Err() != nil {
			t.Fatal("a started run was cancelled by the handover")
		}
		if err := s.handedOver(errors.New("apply failed")); errors.Is(err, errHandedOver) {
			t.Error("a started run's own error was turned into errHandedOver")
		}
	})
	t.Run("no sharding", func(t *testing.T) {
		s := &resourceScope{}
		ctx := context.Background()
		got, stop := s.untilHandover(ctx)
		defer stop()
		if got != ctx || s.startRun() != nil {
			t.Fatal("without sharding the run's context and start are untouched")
		}
	})
}
