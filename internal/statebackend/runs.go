package statebackend

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"maps"
	"slices"
	"sync"
)

// run is one run's credentials as the server keeps them.
type run struct {
	id     string
	suffix string
	pwHash [sha256.Size]byte
	labels map[string]string
	user   string // the credentials' username
	// lockIDs are the locks taken with these credentials, by lock ID (under credentials.mu).
	lockIDs map[string]bool
	// erroredUnkept: KeepErrored could not keep the run's errored state; revoke then leaves the
	// run's locks held and the run in credentials.unkept (under credentials.mu).
	erroredUnkept bool
	// seen is the state as this run last read or wrote it, so that its next write needs no read
	// (Handle.writeFrom); only used under the state's turn (stateTurns).
	seen *storedState
}

// credentials are the run credentials a Server issued and what each run did with them: the locks
// it took and whether its errored state is still to be kept. Its mutex guards its two maps and
// each run's lockIDs and erroredUnkept; it is never held across a request to the API server.
type credentials struct {
	mu sync.Mutex
	// byUser holds the live runs, by username: issued and not revoked yet.
	byUser map[string]*run
	// unkept holds, by run ID, the runs revoked while their errored state could not be kept
	// (KeepErrored); their locks stay held until it is kept or refused.
	unkept map[string]*run
}

// newCredentials returns an empty set of credentials.
func newCredentials() *credentials {
	return &credentials{byUser: map[string]*run{}, unkept: map[string]*run{}}
}

// issue registers new credentials for the run runID of the state suffix: a username
// ("run-" and 12 random bytes, base64url) and a 256-bit random password (base64url), of which only
// the SHA-256 is kept. labels are copied.
func (c *credentials) issue(runID, suffix string, labels map[string]string) (r *run, password string) {
	user := "run-" + randomToken(12)
	password = randomToken(32)
	r = &run{id: runID, user: user, suffix: suffix, pwHash: sha256.Sum256([]byte(password)), labels: maps.Clone(labels), lockIDs: map[string]bool{}}
	c.mu.Lock()
	c.byUser[user] = r
	c.mu.Unlock()
	return r, password
}

// authenticate returns the live run whose credentials these are, or nil. The password is compared
// in constant time (crypto/subtle), by its SHA-256.
func (c *credentials) authenticate(user, password string) *run {
	c.mu.Lock()
	r := c.byUser[user]
	c.mu.Unlock()
	if r == nil {
		return nil
	}
	h := sha256.Sum256([]byte(password))
	if subtle.ConstantTimeCompare(h[:], r.pwHash[:]) != 1 {
		return nil
	}
	return r
}

// live reports whether run runID holds credentials not revoked yet, or was revoked with its
// errored state not kept yet (see Server.Live); "" is never live.
func (c *credentials) live(runID string) bool {
	rn, _ := c.find(runID)
	return rn != nil
}

// find returns run runID among the live runs (live true), or else among those revoked with an
// errored state not kept (live false); nil when neither, or for "".
func (c *credentials) find(runID string) (rn *run, live bool) {
	if runID == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.byUser {
		if r.id == runID {
			return r, true
		}
	}
	if r, ok := c.unkept[runID]; ok {
		return r, false
	}
	return nil, false
}

// all returns the live runs, in no order.
func (c *credentials) all() []*run {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Values(c.byUser))
}

// forget revokes r's credentials: no request authenticates with them any more. When r's errored
// state could not be kept (markUnkept) it is remembered in unkept instead, and forget reports true:
// its locks must stay held.
func (c *credentials) forget(r *run) (unkept bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byUser, r.user)
	if r.erroredUnkept {
		c.unkept[r.id] = r
		return true
	}
	return false
}

// markUnkept records that rn's errored state could not be kept: a revoke then leaves its locks held
// and remembers the run, so that KeepErrored can still take that state for it.
func (c *credentials) markUnkept(rn *run) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rn.erroredUnkept = true
	if _, live := c.byUser[rn.user]; !live {
		c.unkept[rn.id] = rn
	}
}

// forgetUnkept ends what markUnkept recorded and returns the IDs of the locks rn still holds.
func (c *credentials) forgetUnkept(rn *run) (lockIDs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rn.erroredUnkept = false
	delete(c.unkept, rn.id)
	return slices.Collect(maps.Keys(rn.lockIDs))
}

// took reports whether r took the lock id through the server (or took it over, takeOver).
func (c *credentials) took(r *run, id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return r.lockIDs[id]
}

// addLock records the lock id as taken by r.
func (c *credentials) addLock(r *run, id string) {
	c.mu.Lock()
	r.lockIDs[id] = true
	c.mu.Unlock()
}

// dropLock records the lock id as no longer held by r.
func (c *credentials) dropLock(r *run, id string) {
	c.mu.Lock()
	delete(r.lockIDs, id)
	c.mu.Unlock()
}

// takeOver records the lock id as taken by the live run with username user (an adopted run's,
// Server.IssueAdoptedRun); nothing when that run is revoked already.
func (c *credentials) takeOver(user, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.byUser[user]; r != nil {
		r.lockIDs[id] = true
	}
}

// lockIDs returns the IDs of the locks r took and still holds, in no order.
func (c *credentials) lockIDs(r *run) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(r.lockIDs))
}

// release releases the locks ids that r took and still holds, on h's state, forgetting each one
// released (Unlock releases only a lock held under its id: another's lock, a *LockedError, is
// left, as is one the API server could not release). Call it in the state's turn.
func (c *credentials) release(ctx context.Context, h *Handle, r *run, ids []string) {
	for _, id := range ids {
		if err := h.Unlock(ctx, id); err == nil {
			c.dropLock(r, id)
		}
	}
}
