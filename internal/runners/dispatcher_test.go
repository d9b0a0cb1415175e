package runners

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/policy"
	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// staticAuth accepts one token. The TokenReview path is exercised against a real API server by
// the lifecycle suite ("Runner pools").
type staticAuth string

func (a staticAuth) Authenticate(_ context.Context, token string) (string, error) {
	if token != string(a) {
		return "", errors.New("token refused")
	}
	return "system:serviceaccount:ns:runner", nil
}

// startDispatcher serves a Dispatcher over real TLS (a CA kept in a fake clientset) on loopback and
// returns it with a client connection that trusts the CA.
func startDispatcher(t *testing.T, opts DispatcherOptions) (*Dispatcher, *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ca, err := LoadOrCreateCA(ctx, fake.NewClientset(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	serverTLS, err := ca.ServerConfig([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Authenticator == nil {
		opts.Authenticator = staticAuth("good")
	}
	d := NewDispatcher(opts)
	if err := d.Serve(ctx, "127.0.0.1:0", serverTLS); err != nil {
		t.Fatal(err)
	}
	clientTLS, err := ClientConfig(ca.CertPEM, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(d.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return d, conn
}

// fakeRunner is the runner's side of one stream, driven by the test.
type fakeRunner struct {
	t      *testing.T
	stream runnerpb.Runs_RunClient
}

func openRun(t *testing.T, conn *grpc.ClientConn, token, pool string) (*fakeRunner, *runnerpb.RunSpec, error) {
	t.Helper()
	return openRunAs(t, conn, token, &runnerpb.Hello{Runner: "r1", Pool: pool, Features: []string{FeaturePlanPolicy}})
}

// openRunAs is openRun with the runner's hello given (an older runner lists fewer features).
func openRunAs(t *testing.T, conn *grpc.ClientConn, token string, h *runnerpb.Hello) (*fakeRunner, *runnerpb.RunSpec, error) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
	stream, err := runnerpb.NewRunsClient(conn).Run(ctx)
	if err != nil {
		return nil, nil, err
	}
	hello := &runnerpb.RunnerMessage_Hello{Hello: h}
	// io.EOF: the server ended the stream already (a refusal); Recv gives its status.
	if err := stream.Send(&runnerpb.RunnerMessage{Message: hello}); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	m, err := stream.Recv()
	if err != nil {
		return nil, nil, err
	}
	return &fakeRunner{t: t, stream: stream}, m.GetRun(), nil
}

func (f *fakeRunner) send(m *runnerpb.RunnerMessage) {
	f.t.Helper()
	if err := f.stream.Send(m); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeRunner) recv() *runnerpb.ManagerMessage {
	f.t.Helper()
	m, err := f.stream.Recv()
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// Messages a runner sends.
func heartbeat() *runnerpb.RunnerMessage {
	return &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Heartbeat{Heartbeat: &runnerpb.Heartbeat{}}}
}

func result(r *runnerpb.Result) *runnerpb.RunnerMessage {
	return &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Result{Result: r}}
}

type applied struct {
	res *tfrunner.ApplyResult
	err error
}

func applyAsync(d *Dispatcher, ctx context.Context, key string, opts tfrunner.ApplyOptions) chan applied {
	out := make(chan applied, 1)
	go func() {
		res, err := d.Apply(ctx, key, tfrunner.Spec{RunnerPool: "p", Tenant: "team-a", RunID: "run-1"}, opts)
		out <- applied{res, err}
	}()
	return out
}

func TestDispatcherSendsTheGateAndAnswersEvents(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{})
	var events []tfrunner.Event
	gate := &tfrunner.Gate{Approved: "abc", Imported: []string{"module.main.x.y"}, Shown: "abc", ShownReason: v1alpha1.HoldDestructive,
		Policy: []policy.Rule{{Name: "tagged", Expression: "'team' in claim.labels", Action: policy.ActionDeny, Message: "a team"}},
		Facts:  policy.Facts{Claim: policy.Object{Namespace: "shop", Name: "db", Labels: map[string]string{"team": "a"}}, Class: policy.Object{Name: "pg"}, Resource: policy.Object{Name: "pg-1"}, Cost: 12.5}}
	done := applyAsync(d, context.Background(), "res-a", tfrunner.ApplyOptions{
		CheckInputs: true, Gate: gate,
		Events: func(e tfrunner.Event) error { events = append(events, e); return nil },
	})
	r, spec, err := openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	if spec.GetKey() != "res-a" || spec.GetId() != "run-1" || spec.GetOp() != runnerpb.Operation_OPERATION_APPLY ||
		!spec.GetCheckInputs() || !spec.GetEvents() || !reflect.DeepEqual(gateFromProto(spec.GetGate()), gate) {
		t.Fatalf("run spec %+v", spec)
	}
	if !d.Busy("res-a") {
		t.Fatal("a run under way is not busy")
	}
	r.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Applying{Applying: planToProto(&tfjson.Plan{HasChanges: true, ID: "abc"})}})
	r.send(heartbeat())
	if a := r.recv().GetAnswer(); a == nil || a.GetError() != "" {
		t.Fatalf("applying answer %+v", a)
	}
	if l := r.recv().GetLease(); l == nil {
		t.Fatal("the heartbeat was not answered with a lease")
	}
	r.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_CreateStart{CreateStart: &runnerpb.CreateStart{Address: "module.main.x.y"}}})
	if a := r.recv().GetAnswer(); a == nil || a.GetError() != "" {
		t.Fatalf("create-start answer %+v", a)
	}
	res := newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)
	res.ErroredState = []byte("{}")
	r.send(result(res))
	got := <-done
	if got.err != nil || !got.res.Applied {
		t.Fatalf("apply = %+v, %v", got.res, got.err)
	}
	want := []tfrunner.Event{tfrunner.Started{}, tfrunner.Applying{Plan: &tfjson.Plan{HasChanges: true, ID: "abc"}}, tfrunner.CreateStarted{Address: "module.main.x.y"}}
	if !reflect.DeepEqual(events, want) {
		t.Fatalf("events %#v\nwant %#v", events, want)
	}
	if e, ok := d.ErroredState("res-a"); !ok || string(e.State) != "{}" || e.RunID != "run-1" {
		t.Fatalf("errored state kept as %+v, %v; want {} of run-1 (the run that sent it)", e, ok)
	}
	if d.Busy("res-a") {
		t.Fatal("busy after the run")
	}
}

func TestDispatcherReturnsAHeldPlanAndInputErrors(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{})
	done := applyAsync(d, context.Background(), "res-h", tfrunner.ApplyOptions{Gate: &tfrunner.Gate{}})
	r, _, err := openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	plan := &tfjson.Plan{HasChanges: true, ID: "def", Changes: []tfjson.Change{{Address: "module.main.a.b", Actions: []string{"delete"}}}}
	held := &tfrunner.Hold{Plan: plan, Reason: v1alpha1.HoldPolicyDenied, Addresses: []string{"module.main.a.b"}, Rendering: "- destroy",
		Rule: "keep-b", Message: "rule keep-b: b stays (module.main.a.b)"}
	r.send(result(newResult(&tfrunner.ApplyResult{Plan: plan, Held: held}, nil, nil)))
	got := <-done
	if got.err != nil || got.res.Applied || !reflect.DeepEqual(got.res.Held, held) {
		t.Fatalf("apply = %+v (held %+v), %v", got.res, got.res.Held, got.err)
	}

	done = applyAsync(d, context.Background(), "res-i", tfrunner.ApplyOptions{CheckInputs: true})
	r, _, err = openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	r.send(result(newResult(&tfrunner.ApplyResult{}, nil, &tfrunner.InputError{Problems: "x: the module declares no such input"})))
	var ie *tfrunner.InputError
	if got = <-done; !errors.As(got.err, &ie) || ie.Problems != "x: the module declares no such input" {
		t.Fatalf("err = %#v, want *tfrunner.InputError", got.err)
	}
}

// TestDispatcherGivesAPolicyRunOnlyToARunnerThatReadsIt: a runner older than plan policy (its
// hello lists no plan-policy) would apply past the class's rules; the run fails instead, saying
// so, and a run without rules still goes to it.
func TestDispatcherGivesAPolicyRunOnlyToARunnerThatReadsIt(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{})
	old := &runnerpb.Hello{Runner: "r0", Pool: "p"}
	gate := &tfrunner.Gate{Policy: []policy.Rule{{Name: "r", Expression: "true", Action: policy.ActionDeny}}}
	done := applyAsync(d, context.Background(), "res-p", tfrunner.ApplyOptions{Gate: gate})
	_, _, err := openRunAs(t, conn, "good", old)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "plan-policy") {
		t.Fatalf("an old runner was answered %v; want FailedPrecondition naming plan-policy", err)
	}
	var tooOld *RunnerTooOldError
	if got := <-done; !errors.As(got.err, &tooOld) || tooOld.Runner != "r0" {
		t.Fatalf("the run ended with %v; want *RunnerTooOldError of r0", got.err)
	}

	done = applyAsync(d, context.Background(), "res-q", tfrunner.ApplyOptions{Gate: &tfrunner.Gate{}})
	r, spec, err := openRunAs(t, conn, "good", old)
	if err != nil || spec.GetKey() != "res-q" {
		t.Fatalf("a run without rules was not given to the old runner: %v, %v", spec, err)
	}
	r.send(result(newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)))
	if got := <-done; got.err != nil {
		t.Fatal(got.err)
	}
}

type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

func TestDispatcherReturnsTheManagersOwnErrorAndRunErrorsByKind(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{})
	done := applyAsync(d, context.Background(), "res-b", tfrunner.ApplyOptions{
		Events: func(e tfrunner.Event) error {
			if _, ok := e.(tfrunner.CreateStarted); ok {
				return &refusal{"the create could not be recorded"}
			}
			return nil
		},
	})
	r, _, err := openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	r.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_CreateStart{CreateStart: &runnerpb.CreateStart{Address: "module.main.x.y"}}})
	a := r.recv().GetAnswer()
	if a == nil || a.GetError() != "the create could not be recorded" {
		t.Fatalf("answer %+v", a)
	}
	r.send(result(newResult(&tfrunner.ApplyResult{}, nil, errors.Join(tfrunner.ErrStopped, errors.New(a.GetError())))))
	got := <-done
	var ref *refusal
	if !errors.Is(got.err, tfrunner.ErrStopped) || !errors.As(got.err, &ref) {
		t.Fatalf("err = %v, want ErrStopped wrapping the manager's *refusal", got.err)
	}

	done = applyAsync(d, context.Background(), "res-b", tfrunner.ApplyOptions{})
	r, _, err = openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	r.send(result(newResult(nil, nil, &tfrunner.LockError{ID: "l1", Who: "x@y", Op: "apply"})))
	got = <-done
	var le *tfrunner.LockError
	if !errors.As(got.err, &le) || le.ID != "l1" {
		t.Fatalf("err = %v, want *LockError", got.err)
	}

	// Terraform killed on the runner (the OOM killer): the exit status does not cross the
	// stream, Killed must.
	done = applyAsync(d, context.Background(), "res-b", tfrunner.ApplyOptions{})
	r, _, err = openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	r.send(result(&runnerpb.Result{Error: &runnerpb.Error{Kind: runnerpb.ErrorKind_ERROR_KIND_RUN, Message: "signal: killed", Killed: true,
		Detail: &runnerpb.Error_Run{Run: &runnerpb.RunError{Op: "apply", Message: "signal: killed"}}}}))
	got = <-done
	var re *tfrunner.RunError
	if !errors.As(got.err, &re) || !tfrunner.Killed(got.err) {
		t.Fatalf("err = %v, want a *RunError that is Killed", got.err)
	}
}

// A silent runner's run is given up only after its lease plus the fence grace (issue 32: it was
// given up, and its lock released, at the heartbeat timeout, while the runner could still be
// applying), and not much later.
func TestDispatcherGivesUpASilentRunner(t *testing.T) {
	var lost []string
	d, conn := startDispatcher(t, DispatcherOptions{HeartbeatTimeout: time.Second, FenceGrace: 2 * time.Second,
		OnRunnerLost: func(pool, runner, key string, _ error) { lost = append(lost, pool+"/"+runner+"/"+key) }})
	start := time.Now()
	done := applyAsync(d, context.Background(), "res-c", tfrunner.ApplyOptions{})
	if _, _, err := openRun(t, conn, "good", "p"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	var rl *RunnerLostError
	if !errors.As(got.err, &rl) || rl.Runner != "r1" {
		t.Fatalf("err = %v, want *RunnerLostError", got.err)
	}
	if waited := time.Since(start); waited < 3*time.Second || waited > 10*time.Second {
		t.Fatalf("given up after %s; want after the lease (1s) plus the fence grace (2s), soon after", waited)
	}
	if !tfrunner.Killed(got.err) {
		t.Fatal("a lost runner's run is not Killed: the creates it started would not be held")
	}
	if len(lost) != 1 || lost[0] != "p/r1/res-c" || d.Busy("res-c") {
		t.Fatalf("lost %v, busy %v", lost, d.Busy("res-c"))
	}
}

func TestDispatcherRefusesBadTokensAndUnauthorizedPools(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{Authorize: func(_ context.Context, pool, _ string) error {
		if pool != "p" {
			return errors.New("not this pool")
		}
		return nil
	}})
	_, _, err := openRun(t, conn, "bad", "p")
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("bad token: %v", err)
	}
	_, _, err = openRun(t, conn, "good", "q")
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("other pool: %v", err)
	}
	if n := len(d.Runners("p")) + len(d.Runners("q")); n != 0 {
		t.Fatalf("%d refused runners registered", n)
	}
}

func TestDispatcherCancelsTakenRunsAndWithdrawsWaitingOnes(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	waiting := applyAsync(d, ctx, "res-d", tfrunner.ApplyOptions{})
	time.Sleep(100 * time.Millisecond)
	cancel()
	if got := <-waiting; !errors.Is(got.err, context.Canceled) || d.Busy("res-d") {
		t.Fatalf("withdrawn run: %v, busy %v", got.err, d.Busy("res-d"))
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done := applyAsync(d, ctx, "res-e", tfrunner.ApplyOptions{})
	r, _, err := openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if r.recv().GetCancel() == nil {
		t.Fatal("the runner was not told to cancel")
	}
	r.send(result(newResult(&tfrunner.ApplyResult{}, nil, context.Canceled)))
	if got := <-done; !errors.Is(got.err, context.Canceled) {
		t.Fatalf("cancelled run: %v", got.err)
	}
}

func TestQueueServesTenantsInTurn(t *testing.T) {
	q := newPoolLine()
	for _, tenant := range []string{"a", "a", "a", "b"} {
		q.push(&job{tenant: tenant})
	}
	var order string
	for range 4 {
		j, err := q.take(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		order += j.tenant
	}
	if order != "abaa" {
		t.Fatalf("order %s, want abaa", order)
	}
}

func TestDispatcherReadsAResultSentJustBeforeTheStreamCloses(t *testing.T) {
	// Before the messages and the stream's end shared one channel, a Result followed at once by
	// CloseSend could be taken for a lost runner.
	d, conn := startDispatcher(t, DispatcherOptions{})
	for i := range 30 {
		done := applyAsync(d, context.Background(), "res-f", tfrunner.ApplyOptions{})
		r, _, err := openRun(t, conn, "good", "p")
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			r.send(heartbeat())
		}
		r.send(result(newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)))
		if err := r.stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if got := <-done; got.err != nil || !got.res.Applied {
			t.Fatalf("round %d: apply = %+v, %v", i, got.res, got.err)
		}
	}
}

func TestDispatcherRefusesRunsForAPoolThatDoesNotExist(t *testing.T) {
	d, _ := startDispatcher(t, DispatcherOptions{CheckPool: func(_ context.Context, pool string) error {
		return &PoolNotFoundError{Pool: pool}
	}})
	_, err := d.Apply(context.Background(), "res-g", tfrunner.Spec{RunnerPool: "typo"}, tfrunner.ApplyOptions{})
	var nf *PoolNotFoundError
	if !errors.As(err, &nf) || d.Busy("res-g") {
		t.Fatalf("err = %v, busy %v", err, d.Busy("res-g"))
	}
}

// openStream opens a stream whose context the test cancels (the stream breaks, as a cut
// connection's does) and sends first.
func openStream(t *testing.T, conn *grpc.ClientConn, first *runnerpb.RunnerMessage) (*fakeRunner, context.CancelFunc) {
	t.Helper()
	return openStreamAs(t, conn, "good", first)
}

func resume(runID string) *runnerpb.RunnerMessage {
	return &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Resume{Resume: &runnerpb.Resume{RunId: runID, Runner: "r1", Pool: "p"}}}
}

// The lease protocol: each heartbeat is answered with a lease naming it; a run whose stream broke
// goes on over a stream the runner opens with Resume, where an event sent again is answered and the
// Result taken; a Resume of a run the manager does not carry is NotFound.
func TestDispatcherRenewsLeasesAndResumesARunOnANewStream(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{HeartbeatTimeout: 2 * time.Second, FenceGrace: 5 * time.Second})
	var creates []string
	opts := tfrunner.ApplyOptions{Events: func(e tfrunner.Event) error {
		if c, ok := e.(tfrunner.CreateStarted); ok {
			creates = append(creates, c.Address)
		}
		return nil
	}}
	done := applyAsync(d, context.Background(), "res-r", opts)
	first, cancel := openStream(t, conn, &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Hello{Hello: &runnerpb.Hello{Runner: "r1", Pool: "p"}}})
	spec := first.recv().GetRun()
	if spec.GetLeaseMs() != 2000 {
		t.Fatalf("the run starts with a lease of %d ms; want the heartbeat timeout, 2000", spec.GetLeaseMs())
	}
	first.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Heartbeat{Heartbeat: &runnerpb.Heartbeat{Seq: 7}}})
	if l := first.recv().GetLease(); l.GetSeq() != 7 || l.GetValidForMs() != 2000 {
		t.Fatalf("heartbeat 7 answered with %v; want lease 7 for 2000 ms", l)
	}
	cancel() // the stream breaks mid-run

	unknown, _ := openStream(t, conn, resume("no-such-run"))
	if _, err := unknown.stream.Recv(); status.Code(err) != codes.NotFound {
		t.Fatalf("resume of a run not carried: %v; want NotFound", err)
	}
	time.Sleep(3 * time.Second) // past the lease: the run is silent, not given up
	second, _ := openStream(t, conn, resume(spec.GetId()))
	create := &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_CreateStart{CreateStart: &runnerpb.CreateStart{Address: "a.b"}}}
	second.send(create)
	if second.recv().GetAnswer() == nil {
		t.Fatal("an event on the resumed stream was not answered")
	}
	second.send(result(newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)))
	got := <-done
	if got.err != nil || !got.res.Applied || len(creates) != 1 {
		t.Fatalf("resumed run: %+v, %v, creates %v; want applied, one create recorded", got.res, got.err, creates)
	}
}

// A run no runner took yet is withdrawn when the drain begins; one a runner took goes on.
func TestDispatcherDrainWithdrawsWaitingRunsAndLetsTakenOnesFinish(t *testing.T) {
	drain := queue.NewDrain()
	d, conn := startDispatcher(t, DispatcherOptions{Drain: drain})
	taken := applyAsync(d, context.Background(), "res-t", tfrunner.ApplyOptions{})
	r, _, err := openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	go func() {
		_, err := d.Apply(context.Background(), "res-w", tfrunner.Spec{RunnerPool: "p", RunID: "run-w"}, tfrunner.ApplyOptions{})
		waiting <- err
	}()
	time.Sleep(100 * time.Millisecond)
	drain.Begin(time.Minute)
	if err := <-waiting; !errors.Is(err, queue.ErrDraining) {
		t.Fatalf("waiting run at drain: %v; want ErrDraining", err)
	}
	if _, err := d.Apply(context.Background(), "res-n", tfrunner.Spec{RunnerPool: "p", RunID: "run-n"}, tfrunner.ApplyOptions{}); !errors.Is(err, queue.ErrDraining) {
		t.Fatalf("new run while draining: %v; want ErrDraining", err)
	}
	r.send(result(newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)))
	if got := <-taken; got.err != nil || !got.res.Applied {
		t.Fatalf("taken run: %+v, %v; want it finished", got.res, got.err)
	}
}

// A Result that carries neither an error nor the operation's outcome (a runner's bug, or a forged
// result) is an error of the run, never an empty success the controller would dereference
// (issue 33: a Result without Apply or Drift reached a nil dereference).
func TestDispatcherRefusesAResultWithoutAnOutcome(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{})
	done := applyAsync(d, context.Background(), "res-n", tfrunner.ApplyOptions{})
	r, _, err := openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	r.send(result(&runnerpb.Result{}))
	if got := <-done; got.err == nil || got.res == nil {
		t.Fatalf("apply of an empty result = %+v, %v; want a result and an error", got.res, got.err)
	}
	drift := make(chan error, 1)
	go func() {
		res, err := d.DriftCheck(context.Background(), "res-n", tfrunner.Spec{RunnerPool: "p", RunID: "run-2"})
		if err == nil && res == nil {
			err = errors.New("nil result and nil error")
		}
		drift <- err
	}()
	r, _, err = openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	r.send(result(&runnerpb.Result{}))
	if err := <-drift; err == nil || err.Error() == "nil result and nil error" {
		t.Fatalf("drift check of an empty result: %v; want the runner's result refused", err)
	}
}

// TestDispatcherStopsButFencesARunWhoseRunnerSaysSomethingUnknown: a message the manager does not
// know stops the run as a cancel does, and the run stays the runner's until its Result (issue 46:
// it was given up at once, its lock and credentials released while its processes might run).
func TestDispatcherStopsButFencesARunWhoseRunnerSaysSomethingUnknown(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{})
	done := applyAsync(d, context.Background(), "res-u", tfrunner.ApplyOptions{})
	r, _, err := openRun(t, conn, "good", "p")
	if err != nil {
		t.Fatal(err)
	}
	r.send(&runnerpb.RunnerMessage{}) // no message the protocol defines
	if r.recv().GetCancel() == nil {
		t.Fatal("the runner was not told to stop the run")
	}
	select {
	case got := <-done:
		t.Fatalf("the run was given up before its runner answered: %v", got.err)
	case <-time.After(500 * time.Millisecond):
	}
	if !d.Busy("res-u") {
		t.Fatal("the run's key was released while its runner still runs it")
	}
	r.send(result(newResult(&tfrunner.ApplyResult{}, nil, context.Canceled)))
	if got := <-done; !errors.Is(got.err, context.Canceled) || d.Busy("res-u") {
		t.Fatalf("stopped run: %v, busy %v", got.err, d.Busy("res-u"))
	}
}

// A manager that lost its leadership grants no lease: its runner's lease runs out, and the runner
// freezes, then kills, the run before the next leader's fence ends. Before, every heartbeat was
// answered whatever the leadership, and a run the old leader carried went on applying.
func TestDispatcherGrantsNoLeaseOnceNotLeading(t *testing.T) {
	var leading atomic.Bool
	leading.Store(true)
	d, conn := startDispatcher(t, DispatcherOptions{HeartbeatTimeout: 2 * time.Second, FenceGrace: 5 * time.Second, Leading: leading.Load})
	applyAsync(d, context.Background(), "res-l", tfrunner.ApplyOptions{})
	f, _ := openStream(t, conn, &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Hello{Hello: &runnerpb.Hello{Runner: "r1", Pool: "p"}}})
	if f.recv().GetRun() == nil {
		t.Fatal("no run handed over")
	}
	msgs := pump(f)
	f.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Heartbeat{Heartbeat: &runnerpb.Heartbeat{Seq: 1}}})
	if m := <-msgs; m.GetLease().GetSeq() != 1 {
		t.Fatalf("the leader answered heartbeat 1 with %v; want its lease", m)
	}
	leading.Store(false)
	f.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Heartbeat{Heartbeat: &runnerpb.Heartbeat{Seq: 2}}})
	select {
	case m, ok := <-msgs:
		if ok && m.GetLease() != nil {
			t.Fatalf("a manager that no longer leads granted lease %v", m.GetLease())
		}
	case <-time.After(time.Second):
	}
}
