package runners

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
)

// quietStream is a run stream that takes every message and never receives one.
type quietStream struct {
	runnerpb.Runs_RunClient
	sent chan *runnerpb.RunnerMessage
}

func (q *quietStream) Send(m *runnerpb.RunnerMessage) error {
	q.sent <- m
	return nil
}

// runProcess starts a process of key's run in the pool at dir (it carries the workspace, as
// Terraform and its plugins do) and returns it; it is killed when the test ends.
func runProcess(t *testing.T, dir, key string) *os.Process {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), procs.EnvWorkspace+"="+filepath.Join(dir, key))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process
}

// processState is the state letter of /proc/<pid>/stat: "T" for a stopped process.
func processState(t *testing.T, p *os.Process) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.Pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	return fields[0]
}

// Issue 46: a run's processes are frozen once an event has waited answerWait for the manager's
// answer (a broken stream or a slow manager), and go on when it comes; an answer within the wait
// freezes nothing. Before, Terraform went on creating, unrecorded, until the lease lapsed.
func TestRunFreezesWhileAnEventWaitsForItsAnswer(t *testing.T) {
	dir := t.TempDir()
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: tfrunner.Binary{Path: "/bin/false"}, Dir: dir, MaxConcurrent: 1})
	if err != nil {
		t.Fatal(err)
	}
	proc := runProcess(t, dir, "k")
	stream := &quietStream{sent: make(chan *runnerpb.RunnerMessage, 8)}
	r := &Runner{Runs: pool, Log: slog.New(slog.DiscardHandler)}
	s := newSession(r, stream, func() {}, &runnerpb.RunSpec{Id: "run-1", Key: "k", LeaseMs: 60_000}, func() {})

	// Answered at once: nothing frozen.
	done := make(chan error, 1)
	go func() { done <- s.event(tfrunner.CreateStarted{Address: "module.main.a.b"}) }()
	<-stream.sent
	s.answers <- &runnerpb.Answer{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	time.Sleep(answerWait + 200*time.Millisecond) // past the wait: a timer left behind would have fired
	if st := processState(t, proc); st == "T" {
		t.Fatal("a run answered at once was frozen")
	}

	// Not answered: frozen after the wait, thawed by the answer.
	go func() { done <- s.event(tfrunner.CreateStarted{Address: "module.main.c.d"}) }()
	<-stream.sent
	deadline := time.Now().Add(answerWait + 5*time.Second)
	for processState(t, proc) != "T" {
		if time.Now().After(deadline) {
			t.Fatal("the run's process was not frozen while its event waited for an answer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.answers <- &runnerpb.Answer{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for deadline = time.Now().Add(5 * time.Second); processState(t, proc) == "T"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run's process stayed frozen after the answer")
		}
	}

	// A lease hold outlasts the answer's: the process goes on only once both ended.
	if _, ok := s.freeze(holdLease); !ok {
		t.Fatal("freeze(lease) did nothing")
	}
	s.freeze(holdAnswer)
	s.thaw(holdAnswer)
	time.Sleep(100 * time.Millisecond)
	if st := processState(t, proc); st != "T" {
		t.Errorf("thawed (state %s) while the lease hold remained", st)
	}
	s.thaw(holdLease)
}
