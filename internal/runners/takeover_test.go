package runners

import (
	"testing"
	"time"
)

// Issue 64 item 4: with the defaults a run whose leader dies is killed 33 s after the death at the
// soonest (20 s lease − 5 s heartbeat interval + 18 s frozen), later than the next leader's
// takeover with controller-runtime's election (15 s lease, 2 s retry: at most 26.4 s); the frozen
// time ends KillLatency before the fence grace, and settings that leave no room are refused.
func TestTheKillWindowOutlastsALeadersTakeover(t *testing.T) {
	const leaseDuration, retryPeriod = 15 * time.Second, 2 * time.Second
	if got := FrozenFor(DefaultFenceGrace); got != DefaultFenceGrace-KillLatency {
		t.Errorf("FrozenFor(%s) = %s", DefaultFenceGrace, got)
	}
	if got := KillWindow(DefaultHeartbeatTimeout, DefaultHeartbeatInterval, DefaultFenceGrace); got != 33*time.Second {
		t.Errorf("KillWindow of the defaults = %s; want 33s", got)
	}
	if got := Takeover(leaseDuration, retryPeriod); got != 26400*time.Millisecond {
		t.Errorf("Takeover = %s; want 26.4s", got)
	}
	if err := CheckTakeover(DefaultHeartbeatTimeout, DefaultHeartbeatInterval, DefaultFenceGrace, leaseDuration, retryPeriod); err != nil {
		t.Errorf("the defaults refused: %v", err)
	}
	if err := CheckTakeover(DefaultHeartbeatTimeout, DefaultHeartbeatInterval, 10*time.Second, leaseDuration, retryPeriod); err == nil {
		t.Error("a 10 s fence grace (killed 23 s after the death) was taken")
	}
	if got := FrozenFor(2 * time.Second); got != time.Second {
		t.Errorf("FrozenFor of a grace under 2×KillLatency = %s; want half of it", got)
	}
}
