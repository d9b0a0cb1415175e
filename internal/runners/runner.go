package runners

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Runner is the runner's side of the run protocol: Concurrency streams, each asking the manager
// for a run of Pool, running it with Runs (its own tfrunner.Pool, so init is shared per module
// version on this runner), and sending its events, heartbeats and the Result back. State requests of
// its runs go through a loopback proxy to the manager's state server, over TLS.
type Runner struct {
	// Name is the runner's name (its pod); Pool the InfraRunnerPool it serves.
	Name, Pool string
	// Manager is the run protocol's address (host:port); StateURL the state server's base URL
	// for runners (https://host:port).
	Manager, StateURL string
	// TLS trusts the manager's CA (ClientConfig).
	TLS *tls.Config
	// TokenFile is the projected ServiceAccount token of audience Audience.
	TokenFile string
	// Runs executes the runs; Concurrency streams ask for work at once (Runs.MaxConcurrent when
	// zero).
	Runs        *tfrunner.Pool
	Concurrency int
	// HeartbeatInterval is how often a run reports it is alive; DefaultHeartbeatInterval when zero.
	HeartbeatInterval time.Duration
	// Log reports streams that failed and runs that ended; slog.Default when nil.
	Log *slog.Logger

	// stateTarget is where the state proxy sends requests: StateURL, or the leader's own state
	// server named by the last run (RunSpec.StateURL).
	stateTarget atomic.Pointer[url.URL]
}

// setStateTarget points the state proxy at rawURL (https://host:port).
func (r *Runner) setStateTarget(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("state server URL %q: want https://host:port", rawURL)
	}
	r.stateTarget.Store(u)
	return nil
}

// Run serves runs until ctx is done. Runs under way when ctx ends are cancelled (Terraform gets
// SIGINT) and their results still sent. It returns an error only when it cannot start.
func (r *Runner) Run(ctx context.Context) error {
	if r.Log == nil {
		r.Log = slog.Default()
	}
	if r.HeartbeatInterval <= 0 {
		r.HeartbeatInterval = DefaultHeartbeatInterval
	}
	n := r.Concurrency
	if n <= 0 {
		n = r.Runs.MaxConcurrent()
	}
	proxy, stopProxy, err := r.startStateProxy()
	if err != nil {
		return err
	}
	// Runs cancelled at shutdown still save their state and unlock through the proxy: it stops
	// after them.
	defer stopProxy()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, proxy)
		}()
	}
	wg.Wait()
	return nil
}

// work serves runs one after the other on a connection of its own, until ctx is done. A refusal
// by a manager replica that is not the leader closes the connection, so that the next one,
// through the Service, may reach the leader.
func (r *Runner) work(ctx context.Context, proxy string) {
	var conn *grpc.ClientConn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for ctx.Err() == nil {
		if conn == nil {
			var err error
			conn, err = grpc.NewClient(r.Manager,
				grpc.WithTransportCredentials(credentials.NewTLS(r.TLS)),
				grpc.WithPerRPCCredentials(tokenFile(r.TokenFile)),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
				grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
			)
			if err != nil {
				r.Log.Error("run protocol client", "error", err.Error())
				return
			}
		}
		err := r.serveOne(ctx, conn, proxy)
		if err == nil || ctx.Err() != nil {
			continue
		}
		r.Log.Info("run stream ended", "error", err.Error())
		if status.Code(err) == codes.FailedPrecondition {
			_ = conn.Close()
			conn = nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}

// serveOne opens one stream, waits for a run and carries it out. The stream outlives ctx while a
// run is under way: the run is cancelled and its result still sent.
func (r *Runner) serveOne(ctx context.Context, conn *grpc.ClientConn, proxy string) error {
	streamCtx, closeStream := context.WithCancel(context.WithoutCancel(ctx))
	defer closeStream()
	stream, err := runnerpb.NewRunsClient(conn).Run(streamCtx)
	if err != nil {
		return err
	}
	hello := &runnerpb.Hello{Runner: r.Name, Pool: r.Pool}
	if err := stream.Send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Hello{Hello: hello}}); err != nil {
		return err
	}
	// Waiting for work ends with ctx; a run, once given, does not.
	stopWaiting := context.AfterFunc(ctx, closeStream)
	first, err := stream.Recv()
	if !stopWaiting() {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if first.GetRun() == nil {
		return errors.New("the manager's first message is not a run")
	}
	return r.execute(ctx, stream, first.GetRun(), proxy)
}

// execute runs spec, sending its events over stream, and sends its Result. Every file of the run
// (its variables, credentials, kubeconfig) is deleted when it ends.
func (r *Runner) execute(ctx context.Context, stream runnerpb.Runs_RunClient, spec *runnerpb.RunSpec, proxy string) error {
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	stopOnShutdown := context.AfterFunc(ctx, cancelRun)
	defer stopOnShutdown()
	s := &session{stream: stream, in: make(chan *runnerpb.ManagerMessage, 4)}
	// Reader: Cancel and a broken stream (the manager is gone: nobody will use this run's
	// outcome, and its state credentials die with the manager) stop the run.
	go func() {
		defer close(s.in)
		for {
			m, err := stream.Recv()
			if err != nil {
				cancelRun()
				return
			}
			if m.GetCancel() != nil {
				cancelRun()
				continue
			}
			s.in <- m
		}
	}()
	done := make(chan struct{})
	var beating sync.WaitGroup
	beating.Add(1)
	go func() {
		defer beating.Done()
		t := time.NewTicker(r.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = s.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Heartbeat{Heartbeat: &runnerpb.Heartbeat{}}})
			case <-done:
				return
			}
		}
	}()
	key, op := spec.GetKey(), opName(spec.GetOp())
	r.Log.Info("run starting", "run", spec.GetId(), "key", key, "op", op)
	if spec.GetStateUrl() != "" {
		if err := r.setStateTarget(spec.GetStateUrl()); err != nil {
			r.Log.Info("run's state server URL refused; using --state-url", "error", err.Error())
		}
	}
	var res *runnerpb.Result
	if ts, err := specFromProto(spec.GetSpec()); err != nil {
		res = newResult(nil, nil, err)
	} else {
		ts.Env = withStateProxy(ts.Env, proxy)
		res = r.run(runCtx, s, spec, ts)
	}
	close(done)
	beating.Wait() // the stream's sends are the Result's and CloseSend's alone from here
	if data, ok := r.Runs.ErroredState(key); ok {
		res.ErroredState = data
	}
	r.Log.Info("run ended", "run", spec.GetId(), "key", key, "op", op, "error", res.GetError().GetMessage())
	sendErr := s.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Result{Result: res}})
	// The run's files (variables, credentials, kubeconfig, errored state) go, sent or not: a
	// Result that did not arrive makes the manager hold the run as lost.
	r.Runs.Forget(key)
	if sendErr != nil {
		return sendErr
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for range s.in { // until the manager ends the stream
	}
	return nil
}

// run carries out the operation.
func (r *Runner) run(ctx context.Context, s *session, spec *runnerpb.RunSpec, ts tfrunner.Spec) *runnerpb.Result {
	key := spec.GetKey()
	switch spec.GetOp() {
	case runnerpb.Operation_OPERATION_APPLY:
		opts := tfrunner.ApplyOptions{Imports: importsFromProto(spec.GetImports()), CheckInputs: spec.GetCheckInputs(),
			Gate: gateFromProto(spec.GetGate())}
		if spec.GetEvents() {
			opts.Events = s.event
		}
		res, err := r.Runs.Apply(ctx, key, ts, opts)
		return newResult(res, nil, err)
	case runnerpb.Operation_OPERATION_DESTROY:
		return newResult(nil, nil, r.Runs.Destroy(ctx, key, ts))
	case runnerpb.Operation_OPERATION_DRIFT_CHECK:
		res, err := r.Runs.DriftCheck(ctx, key, ts)
		return newResult(nil, res, err)
	}
	return newResult(nil, nil, fmt.Errorf("unknown operation %q", opName(spec.GetOp())))
}

// session is one run's stream: sends from the run and the heartbeat are serialised.
type session struct {
	mu     sync.Mutex
	stream runnerpb.Runs_RunClient
	in     chan *runnerpb.ManagerMessage
}

func (s *session) send(m *runnerpb.RunnerMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(m)
}

// event sends one of the run's events to the manager and waits for its Answer: the run goes on
// only once the manager recorded it. Events the protocol does not carry (Queued: a runner's
// pool never queues) are dropped.
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
	if err := s.send(m); err != nil {
		return fmt.Errorf("telling the manager: %w", err)
	}
	for msg := range s.in {
		if a := msg.GetAnswer(); a != nil {
			if a.GetError() != "" {
				return errors.New(a.GetError())
			}
			return nil
		}
	}
	return errors.New("the manager ended the run's stream")
}

// startStateProxy serves, on a loopback port, a reverse proxy to the manager's state server for
// the runs of this runner (Terraform's http backend speaks plain HTTP to it; the proxy speaks TLS
// to the manager and trusts only its CA). It returns the proxy's base URL.
func (r *Runner) startStateProxy() (string, func(), error) {
	target, err := url.Parse(r.StateURL)
	if err != nil || target.Scheme != "https" || target.Host == "" {
		return "", nil, fmt.Errorf("state server URL %q: want https://host:port", r.StateURL)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	r.stateTarget.Store(target)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := r.stateTarget.Load()
			pr.SetURL(t)
			pr.Out.Host = t.Host
		},
		Transport: &http.Transport{TLSClientConfig: r.TLS.Clone(), ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 16},
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// withStateProxy points the run's state addresses (TF_HTTP_*ADDRESS, the manager's loopback
// server) at the runner's proxy, keeping their paths.
func withStateProxy(env map[string]string, proxy string) map[string]string {
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v
	}
	for _, k := range []string{"TF_HTTP_ADDRESS", "TF_HTTP_LOCK_ADDRESS", "TF_HTTP_UNLOCK_ADDRESS"} {
		v, ok := out[k]
		if !ok {
			continue
		}
		if u, err := url.Parse(v); err == nil {
			out[k] = proxy + u.RequestURI()
		}
	}
	return out
}
