package statebackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
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
type Server struct {
	store *Store

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

	mu      sync.Mutex
	addr    string
	srv     *http.Server
	runs    map[string]*run         // by username
	pending map[string]pendingState // by suffix
	listed  bool                    // the pending Secrets were listed into pending (loadPending)
	// badPending holds, by suffix, the pending Secrets that did not decode when listed.
	badPending map[string]error
	states     map[string]*sync.Mutex // by suffix, held while a request or RetryPending runs
	written    map[string]State       // by suffix: the state last stored through the server, until TakeWritten
	// unkept holds, by run ID, the runs revoked while their errored state could not be kept
	// (KeepErrored); their locks stay held until it is kept or refused.
	unkept map[string]*run
}

// TakeWritten returns the serial, lineage and resource count of the state last stored for suffix
// through this server (a run's POST), and forgets it; false when none was since the last call.
// The controller reads a run's outcome from it instead of reading the state Secret again.
func (s *Server) TakeWritten(suffix string) (State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.written[suffix]
	delete(s.written, suffix)
	return st, ok
}

// errNotLeading refuses the requests of runs while this process's leadership has lapsed.
var errNotLeading = errors.New("this controller no longer leads (its leader election lease was not renewed in time): its runs may not read or write state")

// requestTimeout bounds the work of one request on the API server.
const requestTimeout = 2 * time.Minute

// serialize waits for and holds the mutex of a state; the returned func releases it.
func (s *Server) serialize(suffix string) func() {
	s.mu.Lock()
	m := s.states[suffix]
	if m == nil {
		m = &sync.Mutex{}
		s.states[suffix] = m
	}
	s.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// statePath is the path prefix of state addresses.
const statePath = "/state/"

// maxStateBytes bounds a request body (state JSON): 256 MiB.
const maxStateBytes = 256 << 20

// NewServer returns a server for the states in namespace that keeps historyLimit earlier versions
// of each (0: none; DefaultHistoryLimit is the usual setting).
func NewServer(kube kubernetes.Interface, namespace string, historyLimit int) *Server {
	st := NewStore(kube, namespace)
	st.HistoryLimit = historyLimit
	return &Server{store: st, runs: map[string]*run{}, pending: map[string]pendingState{}, written: map[string]State{},
		states: map[string]*sync.Mutex{}, unkept: map[string]*run{}}
}

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

// Pending returns the state received for suffix that could not be written yet, if any.
func (s *Server) Pending(suffix string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[suffix]
	return bytes.Clone(p.state), ok
}

// RetryPending writes the pending state of suffix, if any — the one this server keeps, or, after a
// restart, the one a killed controller left in its Secret (pending.go) — and forgets it once
// written, releasing the lock of the run that sent it. The write is refused with a *ConflictError
// when the stored state is readable and the pending one does not follow it (never overwritten);
// an unreadable stored state is overwritten. It reports whether a pending state was written. Call
// it before any other run of that state; any request of a run for that state does it first too.
func (s *Server) RetryPending(ctx context.Context, suffix string) (bool, error) {
	unlock := s.serialize(suffix)
	defer unlock()
	return s.flushPending(ctx, s.store.For(suffix))
}

// pendingState is a state received but not written, with the labels of the run that sent it and
// the lock ID that run held.
type pendingState struct {
	state  []byte
	labels map[string]string
	lockID string
}

// loadPending puts the pending states a previous process of the controller left in their Secrets
// into memory: the first call lists them all (one request, labelled LabelPendingState), instead of
// reading one Secret per state. It is first called by the leader's first reconcile that runs
// anything, after any earlier leader stopped serving.
//
// A pending Secret that does not decode stops only its own state, with that error.
func (s *Server) loadPending(ctx context.Context, h *Handle) error {
	s.mu.Lock()
	listed, bad := s.listed, s.badPending[h.suffix]
	s.mu.Unlock()
	if listed {
		return bad
	}
	found, undecoded, err := s.store.listPending(ctx)
	if err != nil {
		return fmt.Errorf("listing pending states: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listed {
		return s.badPending[h.suffix]
	}
	s.badPending = undecoded
	for suffix, p := range found {
		if _, inMemory := s.pending[suffix]; !inMemory {
			s.pending[suffix] = p
		}
	}
	s.listed = true
	return s.badPending[h.suffix]
}

// flushPending writes h's pending state, if any (see RetryPending).
func (s *Server) flushPending(ctx context.Context, h *Handle) (bool, error) {
	if err := s.loadPending(ctx, h); err != nil {
		return false, err
	}
	s.mu.Lock()
	p, ok := s.pending[h.suffix]
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	if len(p.labels) > 0 {
		h = h.WithLabels(p.labels)
	}
	if err := h.flush(ctx, p.state); err != nil {
		return false, fmt.Errorf("writing the state received earlier, which could not be written then: %w", err)
	}
	if err := s.dropPending(ctx, h); err != nil {
		return true, err
	}
	if p.lockID != "" {
		// The lock stayed held while the state was pending; the run that took it has ended.
		var locked *LockedError
		if err := h.Unlock(ctx, p.lockID); err != nil && !errors.As(err, &locked) {
			return true, fmt.Errorf("releasing lock %s after saving the pending state: %w", p.lockID, err)
		}
	}
	return true, nil
}

// dropPending forgets h's pending state, in memory and in its Secret.
func (s *Server) dropPending(ctx context.Context, h *Handle) error {
	if err := h.deletePending(ctx); err != nil {
		return fmt.Errorf("deleting the saved pending state: %w", err)
	}
	s.mu.Lock()
	delete(s.pending, h.suffix)
	s.mu.Unlock()
	return nil
}

// hasPending reports whether suffix has a pending state in memory.
func (s *Server) hasPending(suffix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[suffix]
	return ok
}

// keepPending records state, sent by a run holding lockID, as h's pending state: in memory, then
// in its Secret (before the run is answered), and tells OnPending.
func (s *Server) keepPending(ctx context.Context, h *Handle, state []byte, lockID string, err error) {
	s.mu.Lock()
	s.pending[h.suffix] = pendingState{state: bytes.Clone(state), labels: h.labels, lockID: lockID}
	s.mu.Unlock()
	if serr := h.savePending(ctx, state, lockID); serr != nil {
		err = fmt.Errorf("%w; and it could not be saved to %s either, so only this process keeps it: %v", err,
			PendingSecretName(h.workspace, h.suffix), serr)
	}
	if s.OnPending != nil {
		s.OnPending(h.suffix, bytes.Clone(state), err)
	}
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

// httpError is a response other than success: status and the reason (the body, as text, unless
// holder is set, when the body is the holder's LockInfo JSON).
type httpError struct {
	status int
	err    error
	holder *Lock
}

// ServeHTTP serves the http backend protocol (see Server).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	suffix, ok := strings.CutPrefix(r.URL.Path, statePath)
	if !ok || suffix == "" || strings.Contains(suffix, "/") {
		http.NotFound(w, r)
		return
	}
	user, password, ok := r.BasicAuth()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Basic realm="conductor-tf state"`)
		http.Error(w, "credentials required", http.StatusUnauthorized)
		return
	}
	rn := s.authenticate(user, password)
	if rn == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="conductor-tf state"`)
		http.Error(w, "invalid credentials", http.StatusUnauthorized)
		return
	}
	if rn.suffix != suffix {
		s.fail(w, rn, suffix, &httpError{status: http.StatusForbidden,
			err: fmt.Errorf("the credentials of run %s are not valid for state %s", rn.id, suffix)})
		return
	}
	// One request at a time per state, finished even when the client goes away: a write of
	// several chunks cut off half-way would leave the state unreadable.
	unlock := s.serialize(suffix)
	defer unlock()
	// Checked once the request's turn came (it may have waited behind another's).
	if s.Leading != nil && !s.Leading() {
		s.fail(w, rn, suffix, &httpError{status: http.StatusServiceUnavailable, err: errNotLeading})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), requestTimeout)
	defer cancel()
	r = r.WithContext(ctx)
	h := s.store.For(suffix).WithLabels(rn.labels)
	var e *httpError
	switch r.Method {
	case http.MethodGet:
		e = s.get(w, r, h, rn)
	case http.MethodPost:
		e = s.post(w, r, h, rn)
	case http.MethodDelete:
		e = s.delete(w, r, h, rn)
	case LockMethod:
		e = s.lock(w, r, h, rn)
	case UnlockMethod:
		e = s.unlock(w, r, h, rn)
	default:
		e = &httpError{status: http.StatusMethodNotAllowed, err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	if e != nil {
		s.fail(w, rn, suffix, e)
	}
}

// fail writes e as the response and tells OnError.
func (s *Server) fail(w http.ResponseWriter, rn *run, suffix string, e *httpError) {
	if s.OnError != nil {
		s.OnError(rn.id, suffix, e.status, e.err)
	}
	if e.holder != nil {
		raw, _ := json.Marshal(e.holder)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(e.status)
		_, _ = w.Write(raw)
		return
	}
	http.Error(w, e.err.Error(), e.status)
}
