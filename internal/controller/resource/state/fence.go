package state

import (
	"sync"
	"time"
)

// Fence says since when this manager serves a resource and how long it then leaves alone the
// locks of runs an earlier manager started: the runner fence (a runner cut off from a dead manager
// goes on under its lease, then freezes and kills its run) and the leader fence (a dead leader's
// state server refuses its runs once its lease has lapsed). Durations are wall-clock; zero turns a
// fence off. One Fence is shared by every part of the resource reconciler.
type Fence struct {
	once   sync.Once
	since  time.Time
	runner time.Duration
	leader time.Duration
	// taken, when set (sharding), is when this replica took a resource's bucket (Shard.Since).
	taken func(name string) time.Time
}

// NewFence returns the fence of runner and leader (Reconciler options RunnerFence, LeaderFence);
// taken, when not nil (sharding), says when this replica took resource name's bucket.
func NewFence(runner, leader time.Duration, taken func(name string) time.Time) *Fence {
	return &Fence{runner: runner, leader: leader, taken: taken}
}

// LeadingSince is when this manager began reconciling resources (the first call): reconciles run
// only on the leader, so it is when it began to lead.
func (f *Fence) LeadingSince() time.Time {
	f.once.Do(func() { f.since = time.Now() })
	return f.since
}

// servingSince is when this manager began to serve resource name: when it began to lead, or with
// sharding when it took the resource's bucket, whichever is later.
func (f *Fence) servingSince(name string) time.Time {
	since := f.LeadingSince()
	if f.taken != nil {
		if t := f.taken(name); t.After(since) {
			since = t
		}
	}
	return since
}

// RunnerWait is how long the runner fence still holds for resource name (≤ 0: passed).
func (f *Fence) RunnerWait(name string) time.Duration {
	return f.runner - time.Since(f.servingSince(name))
}

// LeaderWait is how long the leader fence still holds for resource name (≤ 0: passed).
func (f *Fence) LeaderWait(name string) time.Duration {
	return f.leader - time.Since(f.servingSince(name))
}

// EndForTesting ends the fences now (runner, leader: which of them), for specs of what happens once
// a fence has passed.
func (f *Fence) EndForTesting(runner, leader bool) {
	if runner {
		f.runner = 0
	}
	if leader {
		f.leader = time.Nanosecond
	}
}
