package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestFairSlotsOrder checks the round robin itself: three tenants' waiting runs are served one of
// each in turn, first come first served within a tenant, and positions predict the order.
func TestFairSlotsOrder(t *testing.T) {
	f := NewSlots(0)
	ctx := context.Background()
	arrivals := []string{"a1", "a2", "a3", "b1", "c1", "c2"}
	got := make(chan string, len(arrivals))
	positions := map[string]int{}
	var mu sync.Mutex
	for _, name := range arrivals {
		done := make(chan struct{})
		go func() {
			_ = f.Acquire(ctx, name[:1], func(pos, _ int) { mu.Lock(); positions[name] = pos; mu.Unlock(); close(done) })
			got <- name
		}()
		<-done
	}
	var order []string
	for range arrivals {
		f.Release()
		order = append(order, <-got)
	}
	want := []string{"a1", "b1", "c1", "a2", "c2", "a3"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("served %v, want %v", order, want)
	}
	// Positions were computed on arrival: a later arrival of another tenant can move ahead.
	if positions["a1"] != 1 || positions["b1"] != 2 || positions["c2"] != 5 {
		t.Errorf("positions on arrival %v", positions)
	}
}
