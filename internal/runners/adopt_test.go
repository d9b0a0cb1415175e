package runners

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// resumeOf is a Resume of an apply of key, as a runner sends it to whichever manager leads.
func resumeOf(runID, key string) *runnerpb.RunnerMessage {
	return &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Resume{Resume: &runnerpb.Resume{
		RunId: runID, Runner: "r1", Pool: "p", Key: key, Op: runnerpb.Operation_OPERATION_APPLY}}}
}

// pump reads the manager's messages on f's stream into a channel, closed when the stream ends.
func pump(f *fakeRunner) <-chan *runnerpb.ManagerMessage {
	ch := make(chan *runnerpb.ManagerMessage, 16)
	go func() {
		defer close(ch)
		for {
			m, err := f.stream.Recv()
			if err != nil {
				return
			}
			ch <- m
		}
	}()
	return ch
}

// next is the next message of msgs, or nil when none comes within d or the stream ended.
func next(msgs <-chan *runnerpb.ManagerMessage, d time.Duration) *runnerpb.ManagerMessage {
	select {
	case m := <-msgs:
		return m
	case <-time.After(d):
		return nil
	}
}

// Issue 46 item 1: a run a predecessor started is adopted by the manager the runner resumes it to,
// when Adopt vouches for it: the runner gets the new credentials first, leases go on, events wait
// unanswered (the run is frozen) until the caller attaches, and the Result is the attached caller's.
// Before, any run this manager did not start was NotFound, and the runner killed it.
func TestANewLeaderAdoptsARunItsPredecessorStarted(t *testing.T) {
	var revoked atomic.Int32
	asked := make(chan AdoptRequest, 4)
	d, conn := startDispatcher(t, DispatcherOptions{StateURL: "https://10.0.0.2:8444",
		Adopt: func(_ context.Context, r AdoptRequest) (*Adoption, error) {
			asked <- r
			if r.RunID != "run-old" {
				return nil, errors.New("not the resource's last run")
			}
			return &Adoption{Username: "run-new", Password: "secret", Revoke: func() { revoked.Add(1) }}, nil
		},
	})

	refused, _ := openStream(t, conn, resumeOf("run-other", "res-a"))
	if _, err := refused.stream.Recv(); status.Code(err) != codes.NotFound {
		t.Fatalf("a resume Adopt refuses: %v; want NotFound (the runner kills the run)", err)
	}

	r, _ := openStream(t, conn, resumeOf("run-old", "res-a"))
	c := r.recv().GetCredentials()
	if c.GetUsername() != "run-new" || c.GetPassword() != "secret" || c.GetStateUrl() != "https://10.0.0.2:8444" {
		t.Fatalf("first message after the resume: credentials %v; want the adoption's, and this manager's state server", c)
	}
	<-asked // the refused one
	if got, want := <-asked, (AdoptRequest{RunID: "run-old", Key: "res-a", Pool: "p", Runner: "r1", Operation: "apply"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("Adopt asked %+v; want %+v", got, want)
	}
	if key := <-d.Resumed(); key != "res-a" || !d.Adopted("res-a", "run-old") || !d.Busy("res-a") {
		t.Fatalf("resumed %q, adopted %v, busy %v", key, d.Adopted("res-a", "run-old"), d.Busy("res-a"))
	}
	msgs := pump(r)
	r.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Heartbeat{Heartbeat: &runnerpb.Heartbeat{Seq: 3}}})
	if l := next(msgs, 5*time.Second).GetLease(); l.GetSeq() != 3 {
		t.Fatalf("the adopted run's heartbeat was answered with %v; want its lease", l)
	}
	r.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_CreateStart{CreateStart: &runnerpb.CreateStart{Address: "module.main.x.y"}}})
	if m := next(msgs, 500*time.Millisecond); m != nil {
		t.Fatalf("an event of a run no caller attached to was answered: %v", m)
	}

	var events []tfrunner.Event
	done := make(chan applied, 1)
	var revoke func()
	go func() {
		out, rv, ok, err := d.AttachApply(context.Background(), "res-a", "run-old", tfrunner.ApplyOptions{
			Events: func(e tfrunner.Event) error { events = append(events, e); return nil }})
		if !ok {
			err = errors.New("not attached")
		}
		revoke = rv
		done <- applied{out, err}
	}()
	if a := next(msgs, 5*time.Second).GetAnswer(); a == nil || a.GetError() != "" {
		t.Fatalf("the event that waited was answered %v once the caller attached; want an empty answer", a)
	}
	res := newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)
	res.ErroredState = []byte(`{"serial":4}`)
	r.send(result(res))
	got := <-done
	if got.err != nil || !got.res.Applied {
		t.Fatalf("attached apply = %+v, %v; want the adopted run's outcome", got.res, got.err)
	}
	if want := []tfrunner.Event{tfrunner.CreateStarted{Address: "module.main.x.y"}}; !reflect.DeepEqual(events, want) {
		t.Fatalf("events %v; want %v", events, want)
	}
	if e, ok := d.ErroredState("res-a"); !ok || e.RunID != "run-old" {
		t.Fatalf("errored state %+v, %v; want it kept as run-old's", e, ok)
	}
	if revoked.Load() != 0 {
		t.Fatal("the credentials were revoked before the caller stored the errored state")
	}
	revoke()
	if revoked.Load() != 1 || d.Busy("res-a") || d.Adopted("res-a", "run-old") {
		t.Fatalf("after the run: revoked %d, busy %v, adopted %v", revoked.Load(), d.Busy("res-a"), d.Adopted("res-a", "run-old"))
	}
	if _, _, ok, _ := d.AttachApply(context.Background(), "res-a", "run-old", tfrunner.ApplyOptions{}); ok {
		t.Fatal("attached twice to one adopted run")
	}
}

// An adopted run no caller attaches to within AdoptWait is cancelled, and its credentials revoked
// once it ended; a resume of a key with a run under way here is not adopted.
func TestAnAdoptedRunNobodyAttachesToIsCancelled(t *testing.T) {
	var revoked atomic.Int32
	d, conn := startDispatcher(t, DispatcherOptions{AdoptWait: 300 * time.Millisecond,
		Adopt: func(context.Context, AdoptRequest) (*Adoption, error) {
			return &Adoption{Username: "u", Password: "p", Revoke: func() { revoked.Add(1) }}, nil
		},
	})
	r, _ := openStream(t, conn, resumeOf("run-1", "res-c"))
	if r.recv().GetCredentials() == nil {
		t.Fatal("no credentials")
	}
	second, _ := openStream(t, conn, resumeOf("run-2", "res-c"))
	if _, err := second.stream.Recv(); status.Code(err) != codes.NotFound {
		t.Fatalf("a second run of a key with one under way: %v; want NotFound", err)
	}
	// An event that waits for a caller when the adoption expires is refused (the run stops there),
	// or the run would wait for its answer for good.
	r.send(&runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_CreateStart{CreateStart: &runnerpb.CreateStart{Address: "a.b"}}})
	var refused, cancelled bool
	for !refused || !cancelled {
		m := r.recv()
		switch {
		case m.GetAnswer() != nil:
			refused = m.GetAnswer().GetError() == errNotAttached.Error()
		case m.GetCancel() != nil:
			cancelled = true
		default:
			t.Fatalf("after AdoptWait: %v; want the held event refused and Cancel", m)
		}
	}
	r.send(result(newResult(nil, nil, context.Canceled)))
	deadline := time.Now().Add(5 * time.Second)
	for revoked.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the cancelled run's credentials were not revoked")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d.Adopted("res-c", "run-1") {
		t.Fatal("still waiting for a caller after the adoption expired")
	}
}

// A resumed stream of an adopted run gets the adoption's credentials again (the runner may not
// have read them on the stream that broke); a run adopted already is not adopted twice.
func TestAnAdoptedRunGetsItsCredentialsOnEachResumeAndIsAdoptedOnce(t *testing.T) {
	var adoptions atomic.Int32
	d, conn := startDispatcher(t, DispatcherOptions{
		Adopt: func(context.Context, AdoptRequest) (*Adoption, error) {
			adoptions.Add(1)
			return &Adoption{Username: "u", Password: "p", Revoke: func() {}}, nil
		},
	})
	first, cut := openStream(t, conn, resumeOf("run-1", "res-f"))
	if first.recv().GetCredentials() == nil {
		t.Fatal("no credentials")
	}
	cut()
	second, _ := openStream(t, conn, resumeOf("run-1", "res-f"))
	if c := second.recv().GetCredentials(); c.GetUsername() != "u" {
		t.Fatalf("the resumed stream's first message: credentials %v; want the adoption's again", c)
	}
	second.send(result(newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)))
	for deadline := time.Now().Add(5 * time.Second); d.Busy("res-f"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the adopted run did not end")
		}
	}
	again, _ := openStream(t, conn, resumeOf("run-1", "res-f"))
	if _, err := again.stream.Recv(); status.Code(err) != codes.NotFound || adoptions.Load() != 1 {
		t.Fatalf("the same run resumed after its Result: %v, %d adoptions; want NotFound, adopted once", err, adoptions.Load())
	}
}

// An adopted run that ends before any caller attaches is revoked once AdoptWait has passed.
func TestAnAdoptedRunThatEndedUnattachedIsRevoked(t *testing.T) {
	var revoked atomic.Int32
	d, conn := startDispatcher(t, DispatcherOptions{AdoptWait: 500 * time.Millisecond,
		Adopt: func(context.Context, AdoptRequest) (*Adoption, error) {
			return &Adoption{Username: "u", Password: "p", Revoke: func() { revoked.Add(1) }}, nil
		},
	})
	r, _ := openStream(t, conn, resumeOf("run-1", "res-e"))
	if r.recv().GetCredentials() == nil {
		t.Fatal("no credentials")
	}
	r.send(result(newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{}}, nil, nil)))
	deadline := time.Now().Add(5 * time.Second)
	for revoked.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the credentials of a run that ended unattached were never revoked")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d.Adopted("res-e", "run-1") {
		t.Fatal("still waiting for a caller")
	}
}
