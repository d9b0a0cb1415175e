package runners

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
)

// Defaults of a run's lease: a runner sends a heartbeat every DefaultHeartbeatInterval while it
// runs; each is answered with a lease valid for DefaultHeartbeatTimeout from when it was sent. A
// runner freezes its run when its lease expires and kills it if no lease comes soon after; the
// manager gives a run up only when it has heard nothing for DefaultHeartbeatTimeout plus
// DefaultFenceGrace, by when the run has stopped.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultHeartbeatTimeout  = 20 * time.Second
	DefaultFenceGrace        = 20 * time.Second
)

// DefaultQueueTimeout is how long a run waits for a runner of its pool before it is withdrawn
// (*QueueTimeoutError) and its reconcile freed; DefaultStreamIdle is how long a runner's stream
// waits for a run before the manager closes it, so that the runner opens a new one and is
// authenticated and authorized again.
const (
	DefaultQueueTimeout = 2 * time.Minute
	DefaultStreamIdle   = 5 * time.Minute
)

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	// Authenticator verifies the token each stream carries (required).
	Authenticator Authenticator
	// Authorize reports whether the authenticated user may serve pool; nil allows every
	// authenticated user.
	Authorize func(ctx context.Context, pool, user string) error
	// HeartbeatTimeout is a run's lease: how long after sending a heartbeat a runner may go on
	// without the lease that answers it; DefaultHeartbeatTimeout when zero.
	HeartbeatTimeout time.Duration
	// FenceGrace is how much longer than HeartbeatTimeout a silent run is waited for (its runner
	// may resume it) before it is given up as lost, and its lock and credentials released: the
	// time a runner has to kill a run whose lease expired; DefaultFenceGrace when zero.
	FenceGrace time.Duration
	// OnRunnerLost, when set, is told of each run given up because its runner was lost.
	OnRunnerLost func(pool, runner, key string, err error)
	// CheckPool, when set, is asked before a run is queued whether its pool exists: a run for a
	// pool that does not is refused at once instead of waiting for runners that never come.
	CheckPool func(ctx context.Context, pool string) error
	// StateURL, when set, is this manager's own state server for runners (its pod's address),
	// sent with each run: the Service may lead a runner's state requests to a replica that is not
	// the leader, which knows no run's credentials.
	StateURL string
	// Leading, when set, reports whether this manager is the leader; a replica that is not
	// refuses runners (FailedPrecondition), naming the leader when Leader knows it (leader.go):
	// the runners connect there next, else through the Service again.
	Leading func() bool
	// Leader, when set, returns the run protocol address (host:port) of the replica that leads,
	// as this one, not leading, knows it; "" when it knows none (during a takeover). It is asked
	// on each refusal and must answer within a second.
	Leader func() string
	// Drain, when set, is the manager's shutdown: once it begins, runs no runner took yet are
	// withdrawn (queue.ErrDraining) and runs under way go on (see queue.Drain).
	Drain *queue.Drain
	// QueueTimeout is how long a run waits for a runner before it is withdrawn with a
	// *QueueTimeoutError; DefaultQueueTimeout when zero. A pool with no runners then holds none of
	// the controller's reconcile workers for longer than this.
	QueueTimeout time.Duration
	// StreamIdle is how long a runner's stream waits for a run before it is closed
	// (DeadlineExceeded; the runner opens another, authenticated again); DefaultStreamIdle when
	// zero.
	StreamIdle time.Duration
	// Adopt, when set, is asked about a run that a runner resumes and this manager does not carry
	// (its predecessor started it, and died): it vouches for the run with the state credentials it
	// issued for it, or refuses it with an error (the runner then kills the run). Nil refuses every
	// such run. See adopt.go.
	Adopt func(ctx context.Context, r AdoptRequest) (*Adoption, error)
	// AdoptWait is how long an adopted run waits for a caller to attach to it before it is
	// cancelled; twice HeartbeatTimeout plus FenceGrace when zero (a new leader's controllers may
	// take a while to sync their caches and reconcile).
	AdoptWait time.Duration
	// KeepErrored, when set, stores the errored state of an adopted run that no caller attached
	// to, before its credentials are revoked (statebackend.Server.KeepErrored; Router.Attach does
	// it for a run a caller attached to).
	KeepErrored func(ctx context.Context, runID string, state []byte) error
}

// QueueTimeoutError is a run that no runner of its pool took within the queue timeout: the run
// never started. Runners is how many runners of the pool were connected when it was withdrawn.
type QueueTimeoutError struct {
	Pool    string
	Waited  time.Duration
	Runners int
}

func (e *QueueTimeoutError) Error() string {
	return fmt.Sprintf("no runner of pool %s took the run within %s (%d runners connected); it did not start and is tried again",
		e.Pool, e.Waited, e.Runners)
}

// Dispatcher is the manager's side of the run protocol: it queues the runs of resources whose
// class names a runner pool, hands each to the next runner of that pool that asks (Runs/Run), and
// answers the run's events. It implements the controller's Runs for those runs.
type Dispatcher struct {
	opts DispatcherOptions

	mu       sync.Mutex
	queues   map[string]*poolLine             // by pool
	busy     map[string]int                   // runs of a key waiting or running
	errored  map[string]tfrunner.ErroredState // errored.tfstate a runner sent back, by key, with its run
	runners  map[string]map[string]int        // pool → runner → runs it holds
	live     map[string]*job                  // runs a runner took and that are not over, by run ID
	adopted  map[string]*job                  // runs adopted from a predecessor that no caller attached to yet, by run ID
	adopting map[string]bool                  // run IDs whose adoption is under way (Adopt asked, not waiting for a caller yet)
	resumed  chan string                      // keys of runs adopted here, for the controller (Resumed)
	grpc     *grpc.Server
	addr     string
	// running counts the runs queued or under way, for Wait.
	running sync.WaitGroup
}

// MaxMessageBytes bounds one message of the run protocol: 256 MiB, as the state server bounds a
// state (a Result carries an errored state, a plan's rendering and the run's log).
const MaxMessageBytes = 256 << 20

// Wait blocks until no run is queued or under way on a runner, or ctx is done; it reports
// whether they all ended. The manager calls it at shutdown, before it stops the state server
// that cancelled runs still save their state through.
func (d *Dispatcher) Wait(ctx context.Context) bool { return tfrunner.WaitGroup(ctx, &d.running) }

// NewDispatcher returns a Dispatcher; Serve starts its server.
func NewDispatcher(opts DispatcherOptions) *Dispatcher {
	if opts.HeartbeatTimeout <= 0 {
		opts.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if opts.FenceGrace <= 0 {
		opts.FenceGrace = DefaultFenceGrace
	}
	if opts.QueueTimeout <= 0 {
		opts.QueueTimeout = DefaultQueueTimeout
	}
	if opts.StreamIdle <= 0 {
		opts.StreamIdle = DefaultStreamIdle
	}
	if opts.AdoptWait <= 0 {
		opts.AdoptWait = 2 * (opts.HeartbeatTimeout + opts.FenceGrace)
	}
	return &Dispatcher{opts: opts, queues: map[string]*poolLine{}, busy: map[string]int{}, errored: map[string]tfrunner.ErroredState{},
		runners: map[string]map[string]int{}, live: map[string]*job{}, adopted: map[string]*job{}, adopting: map[string]bool{},
		resumed: make(chan string, 256)}
}

// Serve listens on addr ("host:port", port 0 picks one) with TLS and serves the run protocol until
// ctx is done; it returns once listening (Addr tells the address) or the listen error.
func (d *Dispatcher) Serve(ctx context.Context, addr string, tlsConfig *tls.Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("run protocol server: %w", err)
	}
	srv := grpc.NewServer(
		grpc.Creds(credentials.NewTLS(tlsConfig)),
		grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		// Connection-level liveness besides the run's heartbeats: a peer that stops answering
		// pings within 10 s is dropped, which ends its streams.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
	runnerpb.RegisterRunsServer(srv, runsServer{d: d})
	d.mu.Lock()
	d.grpc, d.addr = srv, ln.Addr().String()
	d.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		srv.Stop()
	}()
	return nil
}

// Addr is the address Serve listens on, or "" before.
func (d *Dispatcher) Addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addr
}

// Runners returns, for pool, the runners connected now and the streams each has open (one per
// run it waits for or holds).
func (d *Dispatcher) Runners(pool string) map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for r, n := range d.runners[pool] {
		out[r] = n
	}
	return out
}

// runsServer serves Runs/Run for a Dispatcher.
type runsServer struct {
	runnerpb.UnimplementedRunsServer
	d *Dispatcher
}

func (s runsServer) Run(stream runnerpb.Runs_RunServer) error { return s.d.serveRun(stream) }

// job is one run, from the caller's Apply, Destroy or DriftCheck to its Result.
type job struct {
	pool, tenant string
	// user and runner took the run: only they may resume it.
	user, runner string
	spec         *runnerpb.RunSpec
	opts         tfrunner.ApplyOptions
	cancel       chan struct{} // closed when the caller's ctx is done after a runner took the run
	done         chan struct{} // closed once result and err are set
	resume       chan resumed  // streams the runner opened with Resume for this run
	result       *runnerpb.Result
	hookErr      error // the error the Events sink returned, which stopped the run
	err          error // the run could not finish on its runner (lost), or was never started
	withdrawn    bool  // its caller gave up after a runner took it (guarded by the queue's mu)
	// adopted: the run was started by this manager's predecessor (adoptRun); its caller's events
	// sink comes on sink once a caller attaches, and its events wait for it. claimed (under the
	// Dispatcher's mu) once a caller attached or the adoption expired; revoke is its credentials'.
	adopted bool
	sink    chan tfrunner.Events
	claimed bool
	revoke  func()
	creds   *runnerpb.Credentials // sent again on each stream that resumes the run
}

func (d *Dispatcher) lineOf(pool string) *poolLine {
	d.mu.Lock()
	defer d.mu.Unlock()
	q := d.queues[pool]
	if q == nil {
		q = newPoolLine()
		d.queues[pool] = q
	}
	return q
}

// do queues a run in pool and waits for its outcome. A ctx done while the run waits withdraws it;
// once a runner has it, the runner is told to cancel it and do waits for the result (Terraform
// gets SIGINT and the run ends as an in-process run would).
func (d *Dispatcher) do(ctx context.Context, pool string, spec *runnerpb.RunSpec, opts tfrunner.ApplyOptions) (*job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d.opts.Drain.Draining() {
		return nil, queue.ErrDraining
	}
	if d.opts.CheckPool != nil {
		if err := d.opts.CheckPool(ctx, pool); err != nil {
			return nil, err
		}
	}
	if d.opts.StateURL != "" {
		spec.StateUrl = d.opts.StateURL
	}
	d.running.Add(1)
	defer d.running.Done()
	spec.LeaseMs, spec.FenceGraceMs = d.opts.HeartbeatTimeout.Milliseconds(), d.opts.FenceGrace.Milliseconds()
	j := &job{pool: pool, tenant: spec.GetSpec().GetTenant(), spec: spec, opts: opts, cancel: make(chan struct{}), done: make(chan struct{}),
		resume: make(chan resumed)}
	key := spec.GetKey()
	d.mu.Lock()
	d.busy[key]++
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		if d.busy[key]--; d.busy[key] <= 0 {
			delete(d.busy, key)
		}
		d.mu.Unlock()
	}()
	q := d.lineOf(pool)
	if _, _, idle := q.push(j); !idle {
		// Told once the run has waited queue.QueuedAfter, if no runner took it by then.
		queue.NotifyQueued(ctx, j.done, func() (int, int) { return q.position(j) }, opts.Events.QueuedFunc())
	}
	queued := time.NewTimer(d.opts.QueueTimeout)
	defer queued.Stop()
	select {
	case <-j.done:
	case <-queued.C:
		if q.remove(j) {
			return nil, &QueueTimeoutError{Pool: pool, Waited: d.opts.QueueTimeout, Runners: len(d.Runners(pool))}
		}
		// A runner took it just now: wait for it as usual.
		select {
		case <-j.done:
		case <-ctx.Done():
			close(j.cancel)
			<-j.done
		}
	case <-d.opts.Drain.Begun():
		if q.remove(j) {
			return nil, queue.ErrDraining
		}
		// A runner has it: it goes on, and is cancelled only when ctx is (at the drain's end).
		select {
		case <-j.done:
		case <-ctx.Done():
			close(j.cancel)
			<-j.done
		}
	case <-ctx.Done():
		if q.remove(j) {
			return nil, ctx.Err()
		}
		close(j.cancel)
		<-j.done
	}
	if j.err != nil {
		return j, j.err
	}
	return j, errorFromProto(j.result.GetError(), j.hookErr)
}
