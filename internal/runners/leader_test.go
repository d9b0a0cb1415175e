package runners

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// replicas serves Dispatchers of one CA on loopback, as the manager's replicas behind the
// Service: each certificate names "localhost", the Service's name here.
type replicas struct {
	t  *testing.T
	ca *CA
}

func newReplicas(t *testing.T) *replicas {
	t.Helper()
	ca, err := LoadOrCreateCA(context.Background(), fake.NewClientset(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	return &replicas{t: t, ca: ca}
}

// serve starts a replica and returns it with its address (127.0.0.1:port).
func (rs *replicas) serve(opts DispatcherOptions) (*Dispatcher, string) {
	rs.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rs.t.Cleanup(cancel)
	tlsConfig, err := rs.ca.ServerConfig([]string{"localhost"})
	if err != nil {
		rs.t.Fatal(err)
	}
	if opts.Authenticator == nil {
		opts.Authenticator = staticAuth("good")
	}
	d := NewDispatcher(opts)
	if err := d.Serve(ctx, "127.0.0.1:0", tlsConfig); err != nil {
		rs.t.Fatal(err)
	}
	return d, d.Addr()
}

// runner returns a Runner of pool "p" reaching the manager at "localhost:<port of service>" as it
// would the Service, whose runs fail at once (their binary is /bin/false).
func (rs *replicas) runner(service string) *Runner {
	rs.t.Helper()
	_, port, _ := net.SplitHostPort(service)
	tlsConfig, err := ClientConfig(rs.ca.CertPEM, "localhost")
	if err != nil {
		rs.t.Fatal(err)
	}
	token := filepath.Join(rs.t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("good"), 0o600); err != nil {
		rs.t.Fatal(err)
	}
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: tfrunner.Binary{Path: "/bin/false"}, Dir: rs.t.TempDir(), MaxConcurrent: 1})
	if err != nil {
		rs.t.Fatal(err)
	}
	return &Runner{Name: "r1", Pool: "p", Manager: net.JoinHostPort("localhost", port), StateURL: "https://localhost:1",
		TLS: tlsConfig, TokenFile: token, Runs: pool, Concurrency: 1, Log: slog.New(slog.DiscardHandler)}
}

// start runs r until the test ends (or stop is called) and returns stop, which waits for Run.
func start(t *testing.T, r *Runner) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := r.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// Issue 64 item 4: a replica that is not the leader refuses a runner naming the leader, and the
// runner's next stream goes there, not through the Service again. The runner here reaches only
// the standby by the Service's name; before, it was refused there again and again and the
// leader's run waited in its queue until it was withdrawn (QueueTimeoutError).
func TestAStandbyNamesTheLeaderAndTheRunnerGoesThere(t *testing.T) {
	rs := newReplicas(t)
	leader, leaderAddr := rs.serve(DispatcherOptions{Leading: func() bool { return true }, QueueTimeout: 15 * time.Second})
	var refusals atomic.Int32
	_, standbyAddr := rs.serve(DispatcherOptions{Leading: func() bool { return false },
		Leader: func() string { refusals.Add(1); return leaderAddr }})
	start(t, rs.runner(standbyAddr))

	_, err := leader.Apply(context.Background(), "res-a", tfrunner.Spec{RunnerPool: "p", Tenant: "team-a", RunID: "run-1"}, tfrunner.ApplyOptions{})
	var queued *QueueTimeoutError
	if errors.As(err, &queued) {
		t.Fatalf("the leader's run was never taken: %v (the standby refused %d streams)", err, refusals.Load())
	}
	if err == nil {
		t.Fatal("the run of /bin/false succeeded; want its failure from the runner")
	}
	if refusals.Load() == 0 {
		t.Fatal("the standby refused no stream: the runner did not go through it")
	}
}

// The refusal names the leader only when it is a valid host:port; the runner forgets a named
// leader that refuses in turn or does not answer, and keeps one named since.
func TestRunnerFollowsAndForgetsTheLeaderARefusalNames(t *testing.T) {
	r := &Runner{Manager: "svc:9443", Log: slog.New(slog.DiscardHandler)}
	if addr, refused := leaderNamed(notLeader("10.0.0.7:9443")); !refused || addr != "10.0.0.7:9443" {
		t.Fatalf("leaderNamed(notLeader) = %q, %v", addr, refused)
	}
	if addr, refused := leaderNamed(notLeader("")); !refused || addr != "" {
		t.Fatalf("a refusal naming no leader: %q, %v", addr, refused)
	}
	if _, refused := leaderNamed(status.Error(codes.FailedPrecondition, "runner too old")); refused {
		t.Fatal("another FailedPrecondition read as a refusal by a standby")
	}
	r.observe(notLeader("10.0.0.7:9443"), r.Manager)
	if got := r.leaderTarget(); got != "10.0.0.7:9443" {
		t.Fatalf("after a refusal naming the leader the target is %q", got)
	}
	r.observe(status.Error(codes.Unavailable, "connection refused"), r.Manager)
	if got := r.leaderTarget(); got != "10.0.0.7:9443" {
		t.Fatalf("the Service's failure dropped the named leader: %q", got)
	}
	r.observe(notLeader("10.0.0.7:9443"), "10.0.0.7:9443")
	if got := r.leaderTarget(); got != r.Manager {
		t.Fatalf("the named leader refused naming itself, yet the target is %q", got)
	}
	r.observe(notLeader("10.0.0.8:9443"), r.Manager)
	r.observe(status.Error(codes.Unavailable, "connection refused"), "10.0.0.7:9443")
	if got := r.leaderTarget(); got != "10.0.0.8:9443" {
		t.Fatalf("an older leader's failure dropped the one named since: %q", got)
	}
	r.observe(status.Error(codes.Unavailable, "connection refused"), "10.0.0.8:9443")
	if got := r.leaderTarget(); got != r.Manager {
		t.Fatalf("a named leader that does not answer is still the target: %q", got)
	}
}

// cancelOnRun is a client stream that calls stop as the first Run message is received: the
// runner's context ends just as the manager hands it a run.
type cancelOnRun struct {
	grpc.ClientStream
	once *sync.Once
	stop context.CancelFunc
}

func (c *cancelOnRun) RecvMsg(m any) error {
	err := c.ClientStream.RecvMsg(m)
	if mm, ok := m.(*runnerpb.ManagerMessage); ok && err == nil && mm.GetRun() != nil {
		c.once.Do(c.stop)
	}
	return err
}

// Issue 64: a Run message received just as the runner's context ends is answered, not dropped:
// the runner resumes the run's stream and sends a Result saying it never started. Before, it
// returned at once, and the manager waited the run's lease and fence grace for a runner that
// would never speak, then gave the run up as lost (*RunnerLostError).
func TestARunReceivedAsTheRunnerStopsIsAnsweredNotDropped(t *testing.T) {
	rs := newReplicas(t)
	d, addr := rs.serve(DispatcherOptions{HeartbeatTimeout: 2 * time.Second, FenceGrace: 2 * time.Second})
	r := rs.runner(addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	r.dialOptions = []grpc.DialOption{grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &cancelOnRun{ClientStream: cs, once: &once, stop: cancel}, nil
	})}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	_, err := d.Apply(context.Background(), "res-a", tfrunner.Spec{RunnerPool: "p", Tenant: "team-a", RunID: "run-1"}, tfrunner.ApplyOptions{})
	var lost *RunnerLostError
	switch {
	case errors.As(err, &lost):
		t.Fatalf("the run was dropped by the stopping runner and given up as lost: %v", err)
	case err == nil || !strings.Contains(err.Error(), "did not start"):
		t.Fatalf("Apply: %v; want the runner's answer that the run did not start", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
