package runners

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// session is the runner's side of one run: its stream (replaced by one opened with Resume when it
// breaks), its heartbeats and lease, and the fence that freezes and then kills the run's processes
// when the lease is not renewed (see proto/conductor/runner/v1/runner.proto). Sends are
// serialised.
type session struct {
	r      *Runner
	spec   *runnerpb.RunSpec
	cancel context.CancelFunc // cancels the run (Terraform gets SIGINT)
	log    *slog.Logger

	mu         sync.Mutex
	resumeConn *grpc.ClientConn // the connection of the last resume, if any
	target     string           // where stream goes: the Service, or a leader a refusal named
	stream     runnerpb.Runs_RunClient
	closeOld   context.CancelFunc // ends the current stream's context
	up         chan struct{}      // closed and replaced when a resumed stream replaces stream
	gone       chan struct{}      // closed when the manager gave the run up (NotFound) or none answers
	goneErr    error
	answers    chan *runnerpb.Answer

	seq        uint64
	sent       map[uint64]time.Time // when each recent heartbeat was sent
	leaseLen   time.Duration        // 0: the manager grants no lease; the run is not fenced
	frozenFor  time.Duration        // how long past its lease the run stays frozen before it is killed
	leaseUntil time.Time
	holds      map[string]bool // why the run's processes are stopped (freeze); none: they run
	killed     bool
	processes  bool // the run's processes may be running (fenced only then)

	stateUser  string    // the username of the run's state credentials, which an adoption replaces
	resumedAt  time.Time // the last resume (read's only)
	resultSent bool
	delivered  chan struct{} // closed when the manager ended the stream after the Result
}

func newSession(r *Runner, stream runnerpb.Runs_RunClient, closeStream context.CancelFunc,
	spec *runnerpb.RunSpec, cancel context.CancelFunc) *session {
	lease := time.Duration(spec.GetLeaseMs()) * time.Millisecond
	// Killed KillLatency before the manager's fence ends (its grace after the lease), which leaves
	// a new leader all the time it takes over to adopt the run (takeover.go).
	frozen := lease / 4
	if grace := time.Duration(spec.GetFenceGraceMs()) * time.Millisecond; grace > 0 {
		frozen = FrozenFor(grace)
	}
	return &session{
		frozenFor: frozen,
		r:         r, spec: spec, cancel: cancel, log: r.Log.With("run", spec.GetId(), "key", spec.GetKey()),
		stream: stream, closeOld: closeStream, up: make(chan struct{}), gone: make(chan struct{}),
		answers: make(chan *runnerpb.Answer, 4), sent: map[uint64]time.Time{}, holds: map[string]bool{},
		leaseLen: lease, leaseUntil: time.Now().Add(lease), processes: true, delivered: make(chan struct{}),
	}
}

// current returns the stream in use and a channel closed when another replaces it.
func (s *session) current() (runnerpb.Runs_RunClient, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream, s.up
}

// sendOn sends m on st, serialised with the session's other sends.
func (s *session) sendOn(st runnerpb.Runs_RunClient, m *runnerpb.RunnerMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.Send(m)
}

// start runs the session's reader, heartbeat and fence until stop is closed.
func (s *session) start(stop <-chan struct{}) {
	go s.read(stop)
	go s.beat(stop)
	if s.leaseLen > 0 {
		go s.fence(stop)
	}
}

// read receives the manager's messages: leases renew, Cancel stops the run, Answers go to event.
// A stream that breaks is replaced by one opened with Resume; the manager's clean end of the
// stream after the Result is its delivery.
func (s *session) read(stop <-chan struct{}) {
	for {
		st, up := s.current()
		m, err := st.Recv()
		if err == nil {
			if c := m.GetCredentials(); c != nil {
				// A new leader adopted the run: its credentials are in place before the run's
				// processes go on (the thaw below), or their next state request is refused.
				s.adopted(c)
			}
			// The manager answers on this stream (a resumed one took the run): a freeze for the
			// broken stream ends.
			s.thaw(holdStream)
			switch {
			case m.GetLease() != nil:
				s.renew(m.GetLease())
			case m.GetCancel() != nil:
				s.cancel()
			case m.GetAnswer() != nil:
				select {
				case s.answers <- m.GetAnswer():
				default: // an answer nobody waits for (a resent event answered twice)
				}
			}
			continue
		}
		s.mu.Lock()
		sent := s.resultSent
		s.mu.Unlock()
		if errors.Is(err, io.EOF) && sent {
			close(s.delivered)
			return
		}
		if status.Code(err) == codes.NotFound {
			s.giveUp(fmt.Errorf("the manager gave the run up: %w", err))
			return
		}
		s.mu.Lock()
		target := s.target
		s.mu.Unlock()
		s.r.observe(err, target) // a refusal naming the leader: the resume goes there
		select {
		case <-up: // replaced already
			continue
		default:
		}
		s.freeze(holdStream)
		s.log.Info("run stream broken: the run's processes are frozen while it is resumed on a new stream", "error", err.Error())
		select { // at most one resume a second
		case <-stop:
			return
		case <-time.After(time.Until(s.resumedAt.Add(time.Second))):
		}
		s.resumedAt = time.Now()
		if !s.resume(stop) {
			return
		}
	}
}

// resume opens a stream with Resume, on a new connection (the one that broke may lead to a
// replica that is not the leader, which refuses it naming the leader: the new one goes there,
// leader.go), and makes it the current one. It retries
// every second until it is open, the session stops, or the lease has been expired for over two
// lease lengths (the manager gave the run up by then).
func (s *session) resume(stop <-chan struct{}) bool {
	for {
		conn, target, err := s.r.dial()
		var st runnerpb.Runs_RunClient
		ctx, cancel := context.WithCancel(context.Background())
		if err == nil {
			st, err = runnerpb.NewRunsClient(conn).Run(ctx)
		}
		if err == nil {
			err = st.Send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Resume{Resume: &runnerpb.Resume{
				RunId: s.spec.GetId(), Runner: s.r.Name, Pool: s.r.Pool, Key: s.spec.GetKey(), Op: s.spec.GetOp()}}})
		}
		if err == nil {
			s.mu.Lock()
			s.closeOld()
			if s.resumeConn != nil {
				_ = s.resumeConn.Close()
			}
			s.stream, s.closeOld, s.resumeConn, s.target = st, cancel, conn, target
			close(s.up)
			s.up = make(chan struct{})
			s.mu.Unlock()
			s.log.Info("run resumed on a new stream")
			// A lease at once: a manager that adopts the run renews it with its first answer,
			// before the fence kills a run whose lease ran out while no manager led.
			s.heartbeat()
			return true
		}
		cancel()
		if conn != nil {
			_ = conn.Close()
		}
		s.r.observe(err, target)
		s.mu.Lock()
		expired := s.leaseLen > 0 && time.Since(s.leaseUntil) > 2*s.leaseLen
		s.mu.Unlock()
		if expired {
			s.giveUp(fmt.Errorf("no manager answered for over two leases: %w", err))
			return false
		}
		select {
		case <-stop:
			return false
		case <-time.After(time.Second):
		}
	}
}

// setStateUser records the username of the run's state credentials (TF_HTTP_USERNAME).
func (s *session) setStateUser(user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stateUser = user
}

// adopted puts the credentials of the manager that adopted the run in place of the run's own, in
// the runner's state proxy. Credentials that cannot be used kill the run: its state requests
// would be refused, and what it creates would not be recorded.
func (s *session) adopted(c *runnerpb.Credentials) {
	s.mu.Lock()
	user := s.stateUser
	s.mu.Unlock()
	if err := s.r.swapTo(user, c); err != nil {
		s.giveUp(fmt.Errorf("the manager that adopted the run sent credentials the run cannot use: %w", err))
		return
	}
	s.log.Info("run adopted by a new leader: its state requests use the credentials it issued", "stateServer", c.GetStateUrl())
}

// close ends the session's own connection and stream, if it resumed.
func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resumeConn != nil {
		s.closeOld()
		_ = s.resumeConn.Close()
	}
}

// giveUp records that the manager no longer carries the run: its processes are killed (it may
// not write state or create anything any more) and its events and Result go nowhere.
func (s *session) giveUp(err error) {
	s.mu.Lock()
	select {
	case <-s.gone:
		s.mu.Unlock()
		return
	default:
	}
	s.goneErr = err
	close(s.gone)
	s.mu.Unlock()
	s.log.Info("run given up by the manager; killing what is left of it", "error", err.Error())
	s.kill()
}

// beat sends a heartbeat every HeartbeatInterval until stop is closed.
func (s *session) beat(stop <-chan struct{}) {
	t := time.NewTicker(s.r.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.heartbeat()
		case <-stop:
			return
		}
	}
}

// heartbeat sends the next heartbeat, remembering when, for the lease that answers it.
func (s *session) heartbeat() {
	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.sent[seq] = time.Now()
	delete(s.sent, seq-64)
	st := s.stream
	s.mu.Unlock()
	_ = s.sendOn(st, &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Heartbeat{Heartbeat: &runnerpb.Heartbeat{Seq: seq}}})
}

// renew extends the lease to when heartbeat l.Seq was sent plus l.ValidForMs.
func (s *session) renew(l *runnerpb.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.sent[l.GetSeq()]
	if !ok {
		return
	}
	if until := at.Add(time.Duration(l.GetValidForMs()) * time.Millisecond); until.After(s.leaseUntil) {
		s.leaseUntil = until
	}
}

// event sends one of the run's events to the manager and waits for its Answer: the run goes on
// only once the manager recorded it. An event whose stream broke is sent again on the resumed
// stream (the manager records each idempotently). Events the protocol does not carry (Queued: a
// runner's pool never queues) are dropped.
func (s *session) event(e tfrunner.Event) error {
	m := &runnerpb.RunnerMessage{}
	switch e := e.(type) {
	case tfrunner.CreateStarted:
		m.Message = &runnerpb.RunnerMessage_CreateStart{CreateStart: &runnerpb.CreateStart{Address: e.Address}}
	case tfrunner.Applying:
		m.Message = &runnerpb.RunnerMessage_Applying{Applying: planToProto(e.Plan)}
	default:
		return nil
	}
	// Terraform goes on while the manager has not answered: past answerWait its processes are
	// stopped, so that no create starts unrecorded while the stream is broken or the manager slow.
	// answered guards against a timer that fires as the answer comes: whichever runs second sees
	// the other's work (a freeze after the thaw would never end).
	var answerMu sync.Mutex
	answered := false
	wait := time.AfterFunc(answerWait, func() {
		answerMu.Lock()
		defer answerMu.Unlock()
		if answered {
			return
		}
		if n, ok := s.freeze(holdAnswer); ok {
			s.log.Info("the manager has not answered an event: the run's processes are frozen until it does", "processes", n)
		}
	})
	defer func() {
		answerMu.Lock()
		answered = true
		answerMu.Unlock()
		wait.Stop()
		s.thaw(holdAnswer)
	}()
	for {
		st, up := s.current()
		if err := s.sendOn(st, m); err == nil {
			select {
			case a := <-s.answers:
				if a.GetError() != "" {
					return errors.New(a.GetError())
				}
				return nil
			case <-up:
				continue
			case <-s.gone:
				return fmt.Errorf("telling the manager: %w", s.goneErr)
			}
		}
		select {
		case <-up:
		case <-s.gone:
			return fmt.Errorf("telling the manager: %w", s.goneErr)
		}
	}
}

// deliver sends the run's Result and waits until the manager has it (it ends the stream), sending
// it again on each resumed stream. It reports false when the manager gave the run up first.
func (s *session) deliver(res *runnerpb.Result) bool {
	m := &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Result{Result: res}}
	for {
		st, up := s.current()
		s.mu.Lock()
		s.resultSent = true
		err := st.Send(m)
		s.mu.Unlock()
		if err == nil {
			_ = st.CloseSend()
		}
		select {
		case <-s.delivered:
			return true
		case <-up:
		case <-s.gone:
			return false
		}
	}
}
