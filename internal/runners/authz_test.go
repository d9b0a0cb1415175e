package runners

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// tokens accepts each token as the user it maps to.
type tokens map[string]string

func (a tokens) Authenticate(_ context.Context, token string) (string, error) {
	if u, ok := a[token]; ok {
		return u, nil
	}
	return "", errors.New("token refused")
}

func openStreamAs(t *testing.T, conn *grpc.ClientConn, token string, first *runnerpb.RunnerMessage) (*fakeRunner, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token))
	stream, err := runnerpb.NewRunsClient(conn).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRunner{t: t, stream: stream}
	f.send(first)
	return f, cancel
}

func hello(runner, pool string) *runnerpb.RunnerMessage {
	return &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Hello{Hello: &runnerpb.Hello{Runner: runner, Pool: pool}}}
}

// A run no runner takes is withdrawn after the queue timeout, with an error that says so: a pool
// without runners holds the caller (a reconcile worker) no longer than that.
func TestDispatcherWithdrawsARunNoRunnerTakes(t *testing.T) {
	d, _ := startDispatcher(t, DispatcherOptions{QueueTimeout: 300 * time.Millisecond})
	start := time.Now()
	got := <-applyAsync(d, context.Background(), "res-q", tfrunner.ApplyOptions{})
	var qe *QueueTimeoutError
	if !errors.As(got.err, &qe) || qe.Pool != "p" || qe.Runners != 0 {
		t.Fatalf("got %v; want a *QueueTimeoutError for pool p with no runners", got.err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("withdrawn after %s", waited)
	}
	if d.Busy("res-q") || d.lineOf("p").line.Len() != 0 {
		t.Fatal("the withdrawn run is still queued")
	}
}

// A stream that waits for a run longer than StreamIdle is closed (DeadlineExceeded): the runner
// opens another, whose token is reviewed again.
func TestDispatcherClosesAStreamThatWaitedTooLong(t *testing.T) {
	_, conn := startDispatcher(t, DispatcherOptions{StreamIdle: 300 * time.Millisecond})
	r, _ := openStreamAs(t, conn, "good", hello("r1", "p"))
	if _, err := r.stream.Recv(); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("idle stream: %v; want DeadlineExceeded", err)
	}
}

// Each run is authorized as it is handed over: a runner whose pool stopped authorizing it while
// its stream waited gets PermissionDenied, and the run stays queued for a runner that may take it.
func TestDispatcherAuthorizesEachRunAtHandOver(t *testing.T) {
	var revoked atomic.Bool
	d, conn := startDispatcher(t, DispatcherOptions{Authorize: func(context.Context, string, string) error {
		if revoked.Load() {
			return errors.New("the pool's runners are another account now")
		}
		return nil
	}})
	r, _ := openStreamAs(t, conn, "good", hello("r1", "p"))
	time.Sleep(200 * time.Millisecond) // the stream waits, authorized
	revoked.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := applyAsync(d, ctx, "res-z", tfrunner.ApplyOptions{})
	if _, err := r.stream.Recv(); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("hand-over to a runner no longer authorized: %v; want PermissionDenied", err)
	}
	time.Sleep(100 * time.Millisecond)
	if n := d.lineOf("p").line.Len(); n != 1 {
		t.Fatalf("%d runs queued after the refused hand-over; want the run back in line", n)
	}
	cancel()
	<-done
}

// A run is resumed only by the runner that took it, with the same identity: another runner of the
// pool, or another account, that names the run (its id is in the resource's status) gets NotFound
// and cannot send its result.
func TestDispatcherRefusesAResumeByAnyoneButTheRunnerThatTookTheRun(t *testing.T) {
	d, conn := startDispatcher(t, DispatcherOptions{Authenticator: tokens{"good": "system:serviceaccount:ns:runner",
		"thief": "system:serviceaccount:ns:thief"}, HeartbeatTimeout: 2 * time.Second, FenceGrace: 5 * time.Second})
	done := applyAsync(d, context.Background(), "res-f", tfrunner.ApplyOptions{})
	first, cancel := openStreamAs(t, conn, "good", hello("r1", "p"))
	spec := first.recv().GetRun()
	cancel() // the stream breaks mid-run
	forge := func(token, runner string) {
		t.Helper()
		m := &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Resume{Resume: &runnerpb.Resume{RunId: spec.GetId(), Runner: runner, Pool: "p"}}}
		f, _ := openStreamAs(t, conn, token, m)
		_ = f.stream.Send(result(newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)))
		if _, err := f.stream.Recv(); status.Code(err) != codes.NotFound {
			t.Fatalf("resume by %s as %s: %v; want NotFound", token, runner, err)
		}
	}
	forge("thief", "r1") // another account, the same runner name
	forge("good", "r2")  // the same account, another runner
	select {
	case got := <-done:
		t.Fatalf("a forged resume ended the run: %+v, %v", got.res, got.err)
	case <-time.After(200 * time.Millisecond):
	}
	second, _ := openStreamAs(t, conn, "good", resume(spec.GetId()))
	second.send(result(newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)))
	if got := <-done; got.err != nil || !got.res.Applied {
		t.Fatalf("the run's own runner resumed it: %+v, %v", got.res, got.err)
	}
}

// Pools sharing a ServiceAccount are refused: runners of either could take the other's runs.
func TestPoolAuthorizerRefusesAServiceAccountThatServesTwoPools(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pool := func(name, sa string) *v1alpha1.InfraRunnerPool {
		return &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.InfraRunnerPoolSpec{ServiceAccountName: sa}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pool("a", "shared"), pool("b", "shared"), pool("c", "own")).Build()
	authorize := PoolAuthorizer(c, "ns")
	if err := authorize(context.Background(), "a", ServiceAccountUser("ns", "shared")); err == nil {
		t.Fatal("a ServiceAccount serving pools a and b was authorized for a")
	}
	if err := authorize(context.Background(), "c", ServiceAccountUser("ns", "own")); err != nil {
		t.Fatalf("a pool with its own account: %v", err)
	}
	if err := authorize(context.Background(), "c", ServiceAccountUser("ns", "shared")); err == nil {
		t.Fatal("another pool's account was authorized for c")
	}
}
