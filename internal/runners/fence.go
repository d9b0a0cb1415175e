package runners

import (
	"syscall"
	"time"
)

// Why a run's processes are stopped (session.holds): each reason is added and removed on its own,
// and the processes run again only once none is left.
const (
	// holdLease: the lease expired (fence); a renewal ends it, and none within FrozenFor the
	// fence grace kills the run.
	holdLease = "lease"
	// holdAnswer: an event (a create that starts, the plan to apply) has waited over answerWait
	// for the manager's answer; the answer ends it.
	holdAnswer = "answer"
	// holdStream: the run's stream broke; the first message on the stream that resumes it ends it.
	holdStream = "stream"
)

// answerWait is how long an event waits for the manager's answer before the run's processes are
// frozen (issue 46: Terraform went on creating while a broken stream or a slow manager left the
// creates it started unrecorded, until the lease lapsed).
const answerWait = time.Second

// fence enforces the lease: once it expires the run's processes are frozen (SIGSTOP) and a
// heartbeat asks for a lease at once; a lease that comes thaws them (SIGCONT, unless another hold
// remains); none within FrozenFor the manager's fence grace (a quarter of the lease when the
// manager sends none) kills them (SIGKILL), KillLatency before the manager's fence ends (its grace
// after the lease). A new leader that adopts the run renews the lease within that time
// (takeover.go).
func (s *session) fence(stop <-chan struct{}) {
	t := time.NewTicker(max(s.leaseLen/40, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		now, until, held, killed, running := time.Now(), s.leaseUntil, s.holds[holdLease], s.killed, s.processes
		s.mu.Unlock()
		switch {
		case killed || !running:
		case !held && now.After(until):
			n, ok := s.freeze(holdLease)
			if !ok {
				continue
			}
			s.log.Info("run lease expired: its processes are frozen until the manager renews it", "processes", n,
				"expiredFor", now.Sub(until).Round(time.Millisecond).String())
			s.heartbeat()
		case held && now.Before(until):
			if s.thaw(holdLease) {
				s.log.Info("run lease renewed")
			}
		case held && now.After(until.Add(s.frozenFor)):
			s.log.Info("run lease not renewed: killing its processes before the manager gives the run up")
			s.kill()
		}
	}
}

// freeze adds why to the reasons the run's processes are stopped; the first reason stops them
// (SIGSTOP). It works under the session's lock and only while they run (processesEnded waits for
// it): once they ended, the key's processes are a later run's (issue 46). It returns how many
// processes it signalled, and false when it added nothing (no process of the run runs, the run was
// killed, or why holds already).
func (s *session) freeze(why string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.processes || s.killed || s.holds[why] {
		return 0, false
	}
	s.holds[why] = true
	if len(s.holds) > 1 {
		return 0, true // stopped already
	}
	return s.r.Runs.Signal(s.spec.GetKey(), syscall.SIGSTOP), true
}

// thaw removes why from the reasons the run's processes are stopped; the last one lets them go on
// (SIGCONT). It reports whether why held.
func (s *session) thaw(why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holds[why] {
		return false
	}
	delete(s.holds, why)
	if len(s.holds) == 0 && s.processes && !s.killed {
		s.r.Runs.Signal(s.spec.GetKey(), syscall.SIGCONT)
	}
	return true
}

// kill ends the run's processes at once (SIGKILL, frozen or not) and cancels the run. Once they
// ended (processesEnded) it signals nothing: the key's processes then are a later run's (issue 46).
// The signal is sent under the session's lock, so processesEnded waits for it.
func (s *session) kill() {
	s.cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killed = true
	if s.processes {
		s.r.Runs.Signal(s.spec.GetKey(), syscall.SIGKILL)
	}
}

// processesEnded tells the fence that the run's processes have exited.
func (s *session) processesEnded() {
	s.mu.Lock()
	s.processes = false
	s.mu.Unlock()
}
