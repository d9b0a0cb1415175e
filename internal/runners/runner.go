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
	// DrainTimeout is how long runs under way go on once ctx of Run is done (SIGTERM): the runner
	// takes no new run at once, and cancels those still running only after it (Terraform then
	// gets SIGINT). Zero cancels them at once.
	DrainTimeout time.Duration
	// Log reports streams that failed and runs that ended; slog.Default when nil.
	Log *slog.Logger

	// stateTarget is where the state proxy sends requests: StateURL, or the leader's own state
	// server named by the last run (RunSpec.StateURL) or by the manager that adopted a run.
	stateTarget atomic.Pointer[url.URL]
	// swaps are the state credentials of adopted runs: the run's own username (as Terraform sends
	// it) → the *url.Userinfo the adopting manager issued, which the proxy sends instead.
	swaps sync.Map
	// leader is the run protocol address of the replica a refusal named the leader, where new
	// streams go instead of Manager (leader.go); nil: through Manager.
	leader atomic.Pointer[string]
	// dialOptions are added to every connection's (tests inject faults through them).
	dialOptions []grpc.DialOption
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

// Run serves runs until ctx is done. Once it is, no run is taken; runs under way go on for
// DrainTimeout, then are cancelled (Terraform gets SIGINT), and their results are still sent. It
// returns an error only when it cannot start.
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
// by a manager replica that is not the leader closes the connection: the next goes to the leader
// the refusal names, or through the Service (leader.go).
func (r *Runner) work(ctx context.Context, proxy string) {
	var conn *grpc.ClientConn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	var target string
	for ctx.Err() == nil {
		if conn == nil {
			var err error
			conn, target, err = r.dial()
			if err != nil {
				r.Log.Error("run protocol client", "error", err.Error())
				return
			}
		}
		err := r.serveOne(ctx, conn, target, proxy)
		// A stream that waited too long for a run is closed by the manager: open the next at once.
		if err == nil || ctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded {
			continue
		}
		r.Log.Info("run stream ended", "error", err.Error())
		r.observe(err, target)
		if status.Code(err) == codes.FailedPrecondition || r.leaderTarget() != target {
			_ = conn.Close()
			conn = nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
	}
}

// dial returns a new connection to the manager's run protocol and its target: the leader a
// refusal named, or Manager (the Service: each new connection may reach another replica). The
// certificate of a named leader is verified against Manager's host name, as through the Service.
func (r *Runner) dial() (*grpc.ClientConn, string, error) {
	target := r.leaderTarget()
	tlsConfig := r.TLS
	if target != r.Manager && tlsConfig.ServerName == "" {
		host, _, err := net.SplitHostPort(r.Manager)
		if err != nil {
			host = r.Manager
		}
		tlsConfig = tlsConfig.Clone()
		tlsConfig.ServerName = host
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			d := net.Dialer{Timeout: leaderDialTimeout}
			return d.DialContext(ctx, "tcp", addr)
		}),
		grpc.WithPerRPCCredentials(tokenFile(r.TokenFile)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	}, r.dialOptions...)
	conn, err := grpc.NewClient(target, opts...)
	return conn, target, err
}

// serveOne opens one stream on conn (to target), waits for a run and carries it out. The stream
// outlives ctx while a run is under way: the run is cancelled and its result still sent.
func (r *Runner) serveOne(ctx context.Context, conn *grpc.ClientConn, target, proxy string) error {
	streamCtx, closeStream := context.WithCancel(context.WithoutCancel(ctx))
	defer closeStream()
	stream, err := runnerpb.NewRunsClient(conn).Run(streamCtx)
	if err != nil {
		return err
	}
	hello := &runnerpb.Hello{Runner: r.Name, Pool: r.Pool, Features: []string{FeaturePlanPolicy}}
	if err := stream.Send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Hello{Hello: hello}}); err != nil {
		return err
	}
	// Waiting for work ends with ctx; a run, once given, does not.
	stopWaiting := context.AfterFunc(ctx, closeStream)
	first, err := stream.Recv()
	waiting := stopWaiting()
	if err != nil {
		if !waiting {
			return ctx.Err()
		}
		return err
	}
	if first.GetRun() == nil {
		return errors.New("the manager's first message is not a run")
	}
	// A run that came just as ctx ended (its stream closed under it) is not dropped: the manager
	// handed it over and waits for it. execute answers it, on a resumed stream, with a Result that
	// says it never started (issue 64).
	return r.execute(ctx, stream, closeStream, first.GetRun(), target, proxy)
}

// errStopping is the outcome of a run a runner received as it began to stop: it never started.
var errStopping = errors.New("the runner began to stop as it received the run: the run did not start and is tried again")

// execute runs spec under its lease (session), sending its events over stream, or the streams
// that resume it, and delivers its Result. Every file of the run (its variables, credentials,
// kubeconfig) is deleted once the manager has the Result; a Result the manager never took (it
// gave the run up, and revoked the run's state credentials) leaves the workspace, errored state
// included, until the next run of the key starts clean (startClean logs what it drops).
func (r *Runner) execute(ctx context.Context, stream runnerpb.Runs_RunClient, closeStream context.CancelFunc,
	spec *runnerpb.RunSpec, target, proxy string) error {
	stopping := ctx.Err() != nil
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRun()
	// A shutdown lets the run finish, up to DrainTimeout.
	stopOnShutdown := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(r.DrainTimeout, cancelRun)
		context.AfterFunc(runCtx, func() { t.Stop() })
	})
	defer stopOnShutdown()
	s := newSession(r, stream, closeStream, spec, cancelRun)
	s.target = target
	stop := make(chan struct{})
	defer s.close()
	defer close(stop)
	s.start(stop)
	key, op := spec.GetKey(), opName(spec.GetOp())
	r.Log.Info("run starting", "run", spec.GetId(), "key", key, "op", op, "lease", (time.Duration(spec.GetLeaseMs()) * time.Millisecond).String())
	if spec.GetStateUrl() != "" {
		if err := r.setStateTarget(spec.GetStateUrl()); err != nil {
			r.Log.Info("run's state server URL refused; using --state-url", "error", err.Error())
		}
	}
	r.startClean(spec)
	var res *runnerpb.Result
	if ts, err := specFromProto(spec.GetSpec()); err != nil {
		res = newResult(nil, nil, err)
	} else if stopping {
		res = newResult(nil, nil, errStopping)
	} else {
		ts.Env = withStateProxy(ts.Env, proxy)
		ts.RunID = spec.GetId() // tags what the run leaves (tfrunner's errored state)
		s.setStateUser(ts.Env["TF_HTTP_USERNAME"])
		defer r.forgetSwap(ts.Env["TF_HTTP_USERNAME"])
		res = r.run(runCtx, s, spec, ts)
	}
	s.processesEnded()
	if e, ok := r.Runs.ErroredState(key); ok {
		res.ErroredState = e.State // the workspace started clean: it is this run's
	}
	r.Log.Info("run ended", "run", spec.GetId(), "key", key, "op", op, "error", res.GetError().GetMessage())
	if !s.deliver(res) {
		r.Log.Error("the manager gave the run up before it took its result; an errored state stays in the run's workspace until the next run of its key",
			"run", spec.GetId(), "key", key, "erroredState", res.ErroredState != nil)
		return s.goneErr
	}
	r.Runs.Forget(key)
	return nil
}

// startClean removes what an earlier run of spec's key left in its workspace — a run whose Result
// the manager never took keeps it (execute) — so that a Result carries only what this run did: an
// errored state there is that earlier run's, which the manager gave up and whose credentials it
// revoked, and is never sent under this run's ID (logged, with the run that left it, instead).
func (r *Runner) startClean(spec *runnerpb.RunSpec) {
	key := spec.GetKey()
	if e, ok := r.Runs.ErroredState(key); ok {
		r.Log.Error("dropping the errored state an earlier run left in this key's workspace: the manager gave that run up",
			"run", spec.GetId(), "key", key, "leftBy", e.RunID, "bytes", len(e.State))
	}
	r.Runs.Forget(key)
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
			r.swapCredentials(pr.Out)
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

// swapCredentials puts the credentials a manager issued when it adopted a run (swapTo) in place of
// the run's own on out, a state request of that run; others are left as they are.
func (r *Runner) swapCredentials(out *http.Request) {
	user, _, ok := out.BasicAuth()
	if !ok {
		return
	}
	if v, ok := r.swaps.Load(user); ok {
		u := v.(*url.Userinfo)
		password, _ := u.Password()
		out.SetBasicAuth(u.Username(), password)
	}
}

// swapTo makes the state proxy send c's credentials (and to c's state server, when it names one)
// for the requests Terraform sends as runUser: a manager adopted the run and issued them. It is
// undone by forgetSwap once the run ended.
func (r *Runner) swapTo(runUser string, c *runnerpb.Credentials) error {
	if runUser == "" || c.GetUsername() == "" {
		return errors.New("the run has no state credentials to replace, or the manager sent none")
	}
	if c.GetStateUrl() != "" {
		if err := r.setStateTarget(c.GetStateUrl()); err != nil {
			return err
		}
	}
	r.swaps.Store(runUser, url.UserPassword(c.GetUsername(), c.GetPassword()))
	return nil
}

// forgetSwap drops the credentials swapTo put in place for runUser.
func (r *Runner) forgetSwap(runUser string) { r.swaps.Delete(runUser) }

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
