package statebackend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Server serves the states of a Store to runs through Terraform's "http" state backend protocol,
// as the clients of hashicorp/terraform v1.11.4 and opentofu/opentofu v1.12.6 speak it
// (internal/backend/remote-state/http/client.go in both):
//
//   - GET <address>: 200 with the state JSON (and Content-MD5, which the client checks), or 404
//     or 204 for no state (this server answers 404); 401 "requires auth", 403 "invalid auth".
//   - POST <address>[?ID=<lock ID>] with the state JSON and a Content-MD5 header (base64 MD5 of the
//     body); ID is the client's lock, sent whenever it holds one. 200/201/204 are success.
//   - DELETE <address>: 200 is success (the client's Delete is reached through DeleteWorkspace,
//     which the http backend refuses, so runs are not expected to send it).
//   - LOCK <lock address> with a LockInfo JSON body: 200 locks; 409 or 423 with the holder's
//     LockInfo JSON as body means locked by another (this server answers 423). The client prints
//     "HTTP remote state already locked: ID=<holder's ID>" and a Lock Info block: the holder's in
//     tofu 1.12 and in terraform after 1.11; terraform 1.11.4 shows its own lock request there.
//   - UNLOCK <unlock address>, 200 is success; the body is the LockInfo of the lock (terraform
//     sends the JSON of the lock it took, or nothing on force-unlock; tofu sends {"ID": id, ...}).
//
// Every state is at <address> = http://<server>/state/<suffix>; a run's credentials (IssueRun)
// are valid only for its suffix: no or wrong credentials get 401, another suffix's 403.
//
// Beyond the protocol: a POST whose state has another lineage than the stored state, or a lower
// serial for the same lineage, is refused with 409 and a message in the body (Handle.Write); a
// POST while another lock ID holds the state gets 423 with the holder's LockInfo. A POST whose
// write to the Secrets fails gets 503 (the clients retry it) and the server keeps the state it
// received (Pending, OnPending) until a write succeeds: a later request for that state, or
// RetryPending, writes it first.
//
// A Server is composed of parts, each owning its own maps and mutex: credentials (runs.go: the
// runs' credentials and the locks they took), pendingStates (pending_states.go: states received
// and not written yet), writtenStates (written.go: what the controller reads a run's outcome
// from), stateTurns (turns.go: one piece of work at a time per state) and protocol (protocol.go:
// the HTTP handler over those parts). The Server itself issues and revokes credentials
// (credentials.go), keeps errored states (errored.go) and listens.
type Server struct {
	// OnPending, when set, is called (from the request's goroutine) each time a received state could
	// not be written and is kept as pending, with the state and the write's error. Set it before
	// Start.
	OnPending func(suffix string, state []byte, err error)
	// OnError, when set, is called for every request refused (4xx) or failed (5xx) after the run
	// was authenticated, with the response status and the reason. Set it before Start.
	OnError func(runID, suffix string, status int, err error)
	// Leading, when set, says whether this process still leads (its leader Lease renewed within
	// the renew deadline). While it does not, every request of a run is refused with 503 and no
	// errored state is kept: another replica may lead already, and a run of this one must not
	// write what that one's runs read. Nil: always leading (no leader election). Set it before
	// Start.
	Leading func() bool
	// Serves, when set, says whether this process may serve a run whose state carries these labels
	// now: with sharding, whether it holds the bucket of the run's resource (LabelResource) and
	// renewed its membership in time. While it does not, the run's requests are refused with 503
	// and no errored state of it is kept, as when leadership lapsed. Nil: every run. Set it before
	// Start.
	Serves func(labels map[string]string) bool

	store   *Store
	creds   *credentials
	pending *pendingStates
	written *writtenStates
	turns   *stateTurns
	proto   *protocol

	mu   sync.Mutex // guards addr and srv
	addr string
	srv  *http.Server
}

// NewServer returns a server for the states in namespace that keeps historyLimit earlier versions
// of each (0: none; DefaultHistoryLimit is the usual setting).
func NewServer(kube kubernetes.Interface, namespace string, historyLimit int) *Server {
	st := NewStore(kube, namespace)
	st.HistoryLimit = historyLimit
	s := &Server{store: st, creds: newCredentials(), written: newWrittenStates(), turns: newStateTurns()}
	// The hooks are read when called, so that they may be set after NewServer.
	s.pending = newPendingStates(st, func(suffix string, state []byte, err error) {
		if s.OnPending != nil {
			s.OnPending(suffix, state, err)
		}
	})
	s.proto = &protocol{store: st, creds: s.creds, pending: s.pending, written: s.written, turns: s.turns, leads: s.leads,
		onError: func(runID, suffix string, status int, err error) {
			if s.OnError != nil {
				s.OnError(runID, suffix, status, err)
			}
		}}
	return s
}

// leads reports whether this process may serve run rn now: it leads (Leading; always without it)
// and serves its resource's share (Serves; always without it). It returns nil or the reason why
// not (errNotLeading, errNotServing).
func (s *Server) leads(rn *run) error {
	if s.Leading != nil && !s.Leading() {
		return errNotLeading
	}
	if s.Serves != nil && !s.Serves(rn.labels) {
		return errNotServing
	}
	return nil
}

// errNotLeading refuses the requests of runs while this process's leadership has lapsed.
var errNotLeading = errors.New("this controller no longer leads (its leader election lease was not renewed in time): its runs may not read or write state")

// errNotServing refuses the requests of a run whose resource's bucket this replica no longer holds
// (or whose membership has lapsed): another replica may serve that resource already.
var errNotServing = errors.New("this controller replica no longer serves this resource's share (its bucket moved, or its membership was not renewed in time): its runs may not read or write state")

// Store is the store the server serves.
func (s *Server) Store() *Store { return s.store }

// Start listens on addr ("host:port"; the host must be a loopback address, and an empty host is
// 127.0.0.1; port 0 picks a free port) and serves in the background until ctx is done. It returns
// once listening; Addr then tells the address.
func (s *Server) Start(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("state server address %q: %w", addr, err)
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("state server address %q: only a loopback address is allowed, so that only local runs reach it", addr)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 30 * time.Second}
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.srv = srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	return nil
}

// Addr is the address the server listens on ("127.0.0.1:port"), or "" before Start.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Shutdown stops serving: it waits, until ctx is done, for the requests under way to finish (an
// UNLOCK or a write of several chunks is never cut off half-way while it waits).
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Shutdown(ctx)
}

// ServeHTTP serves the http backend protocol (see Server; protocol.go).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.proto.ServeHTTP(w, r) }

// TakeWritten returns the serial, lineage and resource count (-1 for an encrypted state) of the
// state last stored for suffix through this server (a run's POST), and forgets it; false when none was since the last call.
// The controller reads a run's outcome from it instead of reading the state Secret again.
func (s *Server) TakeWritten(suffix string) (State, bool) { return s.written.take(suffix) }

// Pending returns (a copy of) the state received for suffix that could not be written yet, if
// any; nil and false when none is pending in memory.
func (s *Server) Pending(suffix string) ([]byte, bool) {
	p, ok := s.pending.get(suffix)
	return bytes.Clone(p.state), ok
}

// RelistPending makes the next request for a pending state list the pending state Secrets again
// (LabelPendingState) instead of trusting the listing this process made: with sharding, call it
// before a bucket taken is served, so that the pending states its last holder saved are written
// before anything runs on their states.
func (s *Server) RelistPending() { s.pending.relist() }

// ForgetPending drops from memory, not from their Secrets, the pending states whose run's labels
// match accepts: with sharding, those of the buckets this replica lost, which their new owner
// writes from the Secrets.
func (s *Server) ForgetPending(match func(labels map[string]string) bool) { s.pending.forget(match) }

// StorePendingWhere writes (RetryPending) every pending state this server keeps in memory whose
// run's labels match accepts, each within perWrite, and reports whether none is left: with
// sharding, what a bucket must settle before it is handed back.
func (s *Server) StorePendingWhere(match func(labels map[string]string) bool, perWrite time.Duration) (settled bool, err error) {
	settled = true
	for _, sfx := range s.pending.where(match) {
		ctx, cancel := context.WithTimeout(context.Background(), perWrite)
		var discarded *PendingDiscardedError
		if _, werr := s.RetryPending(ctx, sfx); werr != nil && !errors.As(werr, &discarded) {
			settled, err = false, errors.Join(err, fmt.Errorf("pending state %s: %w", sfx, werr))
		}
		cancel()
	}
	return settled, err
}

// RetryPending writes the pending state of suffix, if any — the one this server keeps, or, after a
// restart, the one a killed controller left in its Secret (pending.go) — and forgets it once
// written, releasing the lock of the run that sent it. A pending state the stored one moved past
// (its lineage, a serial as high or higher) is discarded, kept in the history, with a
// *PendingDiscardedError that says what it held: nothing is pending after it. One of another
// lineage is refused with a *ConflictError and stays pending (never overwritten); an unreadable
// stored state is overwritten. It reports whether a pending state was written. Call
// it before any other run of that state; any request of a run for that state does it first too.
func (s *Server) RetryPending(ctx context.Context, suffix string) (bool, error) {
	done := s.turns.take(suffix)
	defer done()
	return s.pending.flush(ctx, s.store.For(suffix))
}
