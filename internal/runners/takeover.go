package runners

import (
	"fmt"
	"time"
)

// A run on a runner pool outlives the leader that leased it by design (issue 64): the runner
// keeps it frozen past its lease for longer than the next leader can take over and adopt it, and
// kills it before any manager's fence ends.
//
//	leader dies ──► its last lease ends ──► frozen ───────────────► killed (KillLatency before the fence)
//	   │             ≥ lease − interval       FrozenFor(grace) = grace − KillLatency
//	   └──► next leader holds the Lease ──► resume redirected to it ──► adopted, lease renewed: thawed
//	          ≤ Takeover(leaseDuration, retryPeriod)
//
// The manager that gave the lease, alive, gives the run up HeartbeatTimeout + FenceGrace after it
// last heard from it; a new leader leaves its predecessor's runner-pool locks alone as long from
// when it leads (cmd/conductor-tf runnerFence). Both are later than the runner's kill, which counts
// from when it sent its heartbeat, before either heard it.

// KillLatency is the worst time from a runner's decision to kill a frozen run to its processes
// being gone (SIGKILL of stopped processes), as shard.KillLatency is a manager's: the runner kills
// that long before the manager's fence grace ends.
const KillLatency = 2 * time.Second

// adoptBudget bounds the adoption of a resumed run by a new leader: reading the resource from the
// API server and issuing the run's state credentials (resource.Adopter.Vouch), under a slow API server.
const adoptBudget = 5 * time.Second

// FrozenFor is how long past its lease a runner keeps a run frozen (SIGSTOP), waiting for the
// lease of a new leader, before it kills it: the manager's fence grace less KillLatency, or half
// the grace when that is shorter than 2×KillLatency (test settings).
func FrozenFor(grace time.Duration) time.Duration {
	if grace < 2*KillLatency {
		return grace / 2
	}
	return grace - KillLatency
}

// KillWindow is the shortest time from a leader's death to the kill of a run it leased: the last
// heartbeat it answered was sent up to one heartbeat interval before it died, so that lease ends at
// the soonest lease − interval after the death, and the run is frozen FrozenFor(grace) more.
// Durations in, a duration out.
func KillWindow(lease, interval, grace time.Duration) time.Duration {
	return lease - interval + FrozenFor(grace)
}

// Takeover is the longest time from a leader's death to the adoption of its runs by the next
// leader, as client-go's leader election runs it: the leader Lease's duration (the next candidate
// waits it out from the dead leader's last renewal), one retry period with the elector's jitter
// (1.2), then a resume (one a second, after a connect to the dead leader a standby still names,
// leaderDialTimeout) and the adoption itself (adoptBudget). With a single replica the restart of
// its container comes first, which the kubelet delays by its back-off after repeated crashes: two
// replicas make the bound hold.
func Takeover(leaseDuration, retryPeriod time.Duration) time.Duration {
	return leaseDuration + retryPeriod*12/10 + time.Second + leaderDialTimeout + adoptBudget
}

// CheckTakeover refuses lease settings under which a frozen run could be killed before the next
// leader adopts it: KillWindow(lease, interval, grace) must exceed Takeover(leaseDuration,
// retryPeriod). lease, interval and grace are a run's (--runner-heartbeat-timeout, the runners'
// heartbeat interval, --runner-fence-grace); leaseDuration and retryPeriod the leader election's.
func CheckTakeover(lease, interval, grace, leaseDuration, retryPeriod time.Duration) error {
	window, takeover := KillWindow(lease, interval, grace), Takeover(leaseDuration, retryPeriod)
	if window <= takeover {
		return fmt.Errorf("a run on a runner pool whose leader dies would be killed %s after it (lease %s − heartbeat interval %s + fence grace %s − %s), "+
			"before the next leader takes it over (up to %s): raise --runner-fence-grace or --runner-heartbeat-timeout",
			window, lease, interval, grace, KillLatency, takeover)
	}
	return nil
}
