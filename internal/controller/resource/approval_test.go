package resource

import (
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
)

// TestJitterSpreadsByTenPercent: jitter draws from [0.9 d, 1.1 d), and does spread (not a constant).
func TestJitterSpreadsByTenPercent(t *testing.T) {
	d := 10 * time.Minute
	lo, hi := d-d/10, d+d/10
	minSeen, maxSeen := hi, lo
	for range 2000 {
		got := shared.Jitter(d)
		if got < lo || got >= hi {
			t.Fatalf("shared.Jitter(%s) = %s, want within [%s, %s)", d, got, lo, hi)
		}
		minSeen, maxSeen = min(minSeen, got), max(maxSeen, got)
	}
	// 2000 uniform draws leave each end's tenth of the interval empty with probability 0.9^2000.
	if minSeen > lo+d/50 || maxSeen < hi-d/50 {
		t.Errorf("2000 draws spread over [%s, %s] only, want close to [%s, %s)", minSeen, maxSeen, lo, hi)
	}
}
