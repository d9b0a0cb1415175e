package statebackend

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
)

// Settings of the http backend that a run gets through its environment. The variable names and
// defaults are those of hashicorp/terraform v1.11.4 (internal/backend/remote-state/http/backend.go,
// Configure: GetAttrEnvDefaultFallback) and opentofu/opentofu v1.12.6 (same path, Backend schema:
// EnvDefaultFunc), which agree: TF_HTTP_ADDRESS, TF_HTTP_UPDATE_METHOD (POST), TF_HTTP_LOCK_ADDRESS,
// TF_HTTP_UNLOCK_ADDRESS, TF_HTTP_LOCK_METHOD (LOCK), TF_HTTP_UNLOCK_METHOD (UNLOCK),
// TF_HTTP_USERNAME, TF_HTTP_PASSWORD, TF_HTTP_RETRY_MAX (2), TF_HTTP_RETRY_WAIT_MIN (1 s),
// TF_HTTP_RETRY_WAIT_MAX (30 s). Both clients retry (go-retryablehttp) on connection errors and
// 5xx responses other than 501.
const (
	// LockMethod and UnlockMethod are the HTTP methods of lock and unlock requests.
	LockMethod   = "LOCK"
	UnlockMethod = "UNLOCK"
	// retryMax, retryWaitMin and retryWaitMax (seconds) bound the retries of a run's requests: a
	// local server answers fast, and a write that failed is kept (Server.Pending), so a few short
	// retries are enough.
	retryMax     = 3
	retryWaitMin = 1
	retryWaitMax = 5
)

// RunCredentials are what one run needs to use the server for its resource's state.
type RunCredentials struct {
	// RunID names the run in the locks it takes through the server (Lock.Info).
	RunID string
	// Suffix is the state the credentials are valid for.
	Suffix string
	// Address is the state URL (GET, POST, DELETE); LockAddress and UnlockAddress are the URLs of
	// LOCK and UNLOCK requests (the same URL).
	Address, LockAddress, UnlockAddress string
	// Username and Password are the run's HTTP basic auth credentials.
	Username, Password string
	// Encryption is the run's OpenTofu encryption configuration (TF_ENCRYPTION: the RunConfig of
	// its state's keyring, Keyring.ForState: that state's key only), empty when the server's
	// store has no keyring.
	Encryption string
}

// Env returns the environment that configures a `backend "http" {}` block with these credentials:
// every TF_HTTP_* setting the run needs (see the constants above), for terraform and tofu alike.
// With Encryption it also holds TF_ENCRYPTION. It holds the password and the passphrases: pass it to
// the run's process only.
func (c RunCredentials) Env() map[string]string {
	env := map[string]string{
		"TF_HTTP_ADDRESS":        c.Address,
		"TF_HTTP_UPDATE_METHOD":  "POST",
		"TF_HTTP_LOCK_ADDRESS":   c.LockAddress,
		"TF_HTTP_UNLOCK_ADDRESS": c.UnlockAddress,
		"TF_HTTP_LOCK_METHOD":    LockMethod,
		"TF_HTTP_UNLOCK_METHOD":  UnlockMethod,
		"TF_HTTP_USERNAME":       c.Username,
		"TF_HTTP_PASSWORD":       c.Password,
		"TF_HTTP_RETRY_MAX":      strconv.Itoa(retryMax),
		"TF_HTTP_RETRY_WAIT_MIN": strconv.Itoa(retryWaitMin),
		"TF_HTTP_RETRY_WAIT_MAX": strconv.Itoa(retryWaitMax),
	}
	if c.Encryption != "" {
		env[EnvEncryption] = c.Encryption
	}
	return env
}

// EnvList is Env as KEY=VALUE strings, sorted, for exec.Cmd.Env.
func (c RunCredentials) EnvList() []string {
	env := c.Env()
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// randomToken returns n random bytes, base64url without padding.
func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// newLockID returns a random UUID (version 4, apimachinery's uuid.NewUUID), the form of
// Terraform's lock IDs.
func newLockID() string { return string(uuid.NewUUID()) }

// IssueRun issues credentials for one run of the resource whose state has this suffix (in
// DefaultWorkspace), with a new random run ID; see IssueRunAs.
func (s *Server) IssueRun(suffix string, labels map[string]string) (RunCredentials, func()) {
	return s.IssueRunAs(randomToken(6), suffix, labels)
}

// IssueRunAs issues credentials for the run runID of the resource whose state has this suffix:
// a username and a random 256-bit password for HTTP basic auth, valid for that suffix only and
// until revoke is called (revoke is idempotent). Call revoke once the run's processes have exited:
// it also releases every lock those credentials took that is still held under its ID (a run
// killed, or cancelled, before its UNLOCK), unless the state the run sent is pending (not saved
// yet: the lock stays until it is, see pending.go); it waits at most revokeTimeout for the API
// server, and a lock it could not release is left for recovery by run id. labels are put on the
// state's Secrets and Lease when the server writes them (besides the backend's own), like the
// backend's `labels` setting. The server must have been started (Start), since the addresses name
// its port.
func (s *Server) IssueRunAs(runID, suffix string, labels map[string]string) (creds RunCredentials, revoke func()) {
	r, password := s.creds.issue(runID, suffix, labels)
	u := stateURL(s.Addr(), suffix)
	creds = RunCredentials{
		RunID: runID, Suffix: suffix,
		Address: u, LockAddress: u, UnlockAddress: u,
		Username: r.user, Password: password,
	}
	if keys := s.store.Keyring(); keys != nil {
		creds.Encryption = keys.ForState(StateID(DefaultWorkspace, suffix)).RunConfig()
	}
	var once sync.Once
	return creds, func() { once.Do(func() { s.revoke(r) }) }
}

// Live reports whether the run runID holds credentials that are not revoked yet: it was issued
// them (IssueRunAs) before its first command and its caller revokes them once its processes have
// exited, so a run that is waiting, running or still stopping is live. It is what this server
// knows of live runs, whichever pool carries them; "" is never live. A run revoked while its
// errored state could not be kept (KeepErrored) stays live, with its locks, until that state is
// kept or refused: its lock is not a dead run's to recover.
func (s *Server) Live(runID string) bool { return s.creds.live(runID) }

// RevokeAll revokes the credentials of every run at once (as each run's revoke does: the locks
// they took are released unless their state is pending or their errored state is not kept yet).
// Call it once the runs' processes are gone — on lost leadership, after they were killed — so that
// nothing this process issued can reach a state again.
func (s *Server) RevokeAll() {
	// At once for all: each revoke may wait revokeTimeout for an API server that is not there.
	var wg sync.WaitGroup
	for _, r := range s.creds.all() {
		wg.Go(func() { s.revoke(r) })
	}
	wg.Wait()
}

// revokeTimeout bounds the lock releases of a revoke.
const revokeTimeout = 30 * time.Second

// revoke forgets a run's credentials and releases the locks it took and still holds.
func (s *Server) revoke(r *run) {
	if s.creds.forget(r) {
		// Its errored state is still to be kept (KeepErrored): its locks stay, so that nothing runs
		// on the older stored state meanwhile, and the run is remembered to take that state.
		return
	}
	// In the state's turn: a request of the run still in flight (a LOCK of a killed Terraform)
	// has finished, and its lock is in lockIDs.
	done := s.turns.take(r.suffix)
	defer done()
	ids := s.creds.lockIDs(r)
	if len(ids) == 0 || s.pending.has(r.suffix) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
	defer cancel()
	s.creds.release(ctx, s.store.For(r.suffix), r, ids)
}

// runInfoPrefix starts the Info of every lock taken through the server.
const runInfoPrefix = "conductor-tf run "

// runLockInfo is the Info of a lock run runID takes through the server: it names the run, then
// keeps what the client sent, if anything.
func runLockInfo(runID, clientInfo string) string {
	if clientInfo == "" {
		return runInfoPrefix + runID
	}
	return runInfoPrefix + runID + ": " + clientInfo
}

// RunOfLock returns the ID of the run that took lock through a Server, or ok=false when it was not
// taken through one (a person's terraform, say).
func RunOfLock(lock *Lock) (runID string, ok bool) {
	if lock == nil || !strings.HasPrefix(lock.Info, runInfoPrefix) {
		return "", false
	}
	rest := strings.TrimPrefix(lock.Info, runInfoPrefix)
	id, _, _ := strings.Cut(rest, ": ")
	return id, id != ""
}
