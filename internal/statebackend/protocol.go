package statebackend

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// protocol is the HTTP handler of a Server: Terraform's http backend protocol (see Server for the
// requests and their sources) over the server's parts. It authenticates each request against the
// run credentials, runs it in its state's turn, and answers from the store, the pending states and
// the locks each run took (protocol_requests.go).
type protocol struct {
	store   *Store
	creds   *credentials
	pending *pendingStates
	written *writtenStates
	turns   *stateTurns
	// leads says whether this process may serve a run now, or why not (Server.leads).
	leads func(rn *run) error
	// onError is told of every request refused or failed once its run was authenticated
	// (Server.OnError).
	onError func(runID, suffix string, status int, err error)
}

// statePath is the path prefix of state addresses.
const statePath = "/state/"

// maxStateBytes bounds a request body (state JSON): 256 MiB.
const maxStateBytes = 256 << 20

// requestTimeout bounds the work of one request on the API server.
const requestTimeout = 2 * time.Minute

// stateURL is the address of a state on a server listening at addr: http://<addr>/state/<suffix>.
func stateURL(addr, suffix string) string {
	u := url.URL{Scheme: "http", Host: addr, Path: statePath + url.PathEscape(suffix)}
	return u.String()
}

// httpError is a response other than success: status and the reason (the body, as text, unless
// holder is set, when the body is the holder's LockInfo JSON).
type httpError struct {
	status int
	err    error
	holder *Lock
}

// unavailable is a 503 for an error of the API server (the clients retry 5xx).
func unavailable(err error) *httpError {
	return &httpError{status: http.StatusServiceUnavailable, err: err}
}

// ServeHTTP serves the http backend protocol (see Server): 404 for a path that is not
// /state/<suffix>, 401 without valid credentials, 403 for another suffix's, 503 while this process
// does not lead, 405 for another method; otherwise the request's handler answers.
func (p *protocol) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	rn := p.creds.authenticate(user, password)
	if rn == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="conductor-tf state"`)
		http.Error(w, "invalid credentials", http.StatusUnauthorized)
		return
	}
	if rn.suffix != suffix {
		p.fail(w, rn, suffix, &httpError{status: http.StatusForbidden,
			err: fmt.Errorf("the credentials of run %s are not valid for state %s", rn.id, suffix)})
		return
	}
	// One request at a time per state, finished even when the client goes away: a write of
	// several chunks cut off half-way would leave the state unreadable.
	done := p.turns.take(suffix)
	defer done()
	// Checked once the request's turn came (it may have waited behind another's).
	if err := p.leads(rn); err != nil {
		p.fail(w, rn, suffix, &httpError{status: http.StatusServiceUnavailable, err: err})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), requestTimeout)
	defer cancel()
	r = r.WithContext(ctx)
	h := p.store.For(suffix).WithLabels(rn.labels)
	var e *httpError
	switch r.Method {
	case http.MethodGet:
		e = p.get(w, r, h, rn)
	case http.MethodPost:
		e = p.post(w, r, h, rn)
	case http.MethodDelete:
		e = p.delete(w, r, h, rn)
	case LockMethod:
		e = p.lock(w, r, h, rn)
	case UnlockMethod:
		e = p.unlock(w, r, h, rn)
	default:
		e = &httpError{status: http.StatusMethodNotAllowed, err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	if e != nil {
		p.fail(w, rn, suffix, e)
	}
}

// fail writes e as the response and tells onError.
func (p *protocol) fail(w http.ResponseWriter, rn *run, suffix string, e *httpError) {
	if p.onError != nil {
		p.onError(rn.id, suffix, e.status, e.err)
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

// readBody reads a request body (at most maxStateBytes, else 400), checking its Content-MD5 header
// (base64 MD5 of the body) when present: a mismatch is a 400.
func readBody(r *http.Request, w http.ResponseWriter) ([]byte, *httpError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxStateBytes))
	if err != nil {
		return nil, &httpError{status: http.StatusBadRequest, err: fmt.Errorf("reading the request body: %w", err)}
	}
	if raw := r.Header.Get("Content-MD5"); raw != "" {
		sum := md5.Sum(body)
		if raw != base64.StdEncoding.EncodeToString(sum[:]) {
			return nil, &httpError{status: http.StatusBadRequest, err: errors.New("the body does not match its Content-MD5")}
		}
	}
	return body, nil
}
