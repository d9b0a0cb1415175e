package tfrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/warm"
)

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Binary runs every command.
	Binary Binary
	// Dir holds one working directory per key (Dir/<key>).
	Dir string
	// Env is the whole environment of every command (see NewWorkspace).
	Env map[string]string
	// MaxConcurrent bounds the runs executing at once; runtime.NumCPU() when zero.
	MaxConcurrent int
	// GracePeriod is how long a cancelled command gets after SIGINT; DefaultGracePeriod when zero.
	GracePeriod time.Duration
	// Observer, when set, is told when runs take and give back slots (the controller's metrics).
	Observer Observer
	// WarmProviders, when set, keeps provider processes between runs and reattaches the common
	// run's apply to them (warm.go); nil starts every provider with its run.
	WarmProviders *warm.Providers
	// Drain, when set, is the manager's shutdown: once it begins, runs waiting for a slot are
	// refused (ErrDraining) and runs under way go on (see Drain).
	Drain *queue.Drain
}

// Observer is told about the pool's slots.
type Observer interface {
	// SlotAcquired reports a run that got a slot after waiting wait.
	SlotAcquired(wait time.Duration)
	// SlotReleased reports a run that gave its slot back.
	SlotReleased()
}

// Pool runs Terraform for many keys (one per resource) with bounded concurrency. It keeps one
// Workspace per key, so init runs only when the module address, backend or binary changes, and it
// serialises init across keys, because a shared provider plugin cache (TF_PLUGIN_CACHE_DIR) is not
// safe for concurrent installs.
//
// Its methods are in three files: the slots and workspaces (pool.go), the runs Apply, DriftCheck
// and Destroy make (apply.go), and the errored state a run leaves (errored_state.go).
type Pool struct {
	opts   PoolOptions
	slots  *queue.Slots
	initMu sync.Mutex

	mu          sync.Mutex
	workspaces  map[string]*slot
	sharedInits map[string]*sharedInit
	// running counts the runs inside do (waiting or running), for Wait.
	running sync.WaitGroup
}

// slot is one key's workspace in a Pool: its mutex gives one run of the key at a time the use of
// ws, made on the key's first run (Pool.do) and forgotten with the key (Pool.Forget).
type slot struct {
	mu sync.Mutex
	ws *Workspace
	// busy counts the runs of this key that are waiting or running (guarded by Pool.mu).
	busy int
}

// NewPool creates the pool's directory (mode 0700) and returns the pool.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = runtime.NumCPU()
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("runner pool directory: %w", err)
	}
	// Processes an earlier process of this pool's runs left behind (it was killed) go first.
	procs.Reap(opts.Dir, true)
	return &Pool{opts: opts, slots: queue.NewSlots(opts.MaxConcurrent), workspaces: map[string]*slot{}}, nil
}

// Wait blocks until no run is waiting or running in the pool, or ctx is done; it reports whether
// the pool drained. Shutdown calls it after cancelling the runs' contexts (Terraform got SIGINT)
// so that their last state writes and unlocks reach the state server before it stops.
func (p *Pool) Wait(ctx context.Context) bool { return WaitGroup(ctx, &p.running) }

// WaitGroup waits for wg until ctx is done and reports whether wg finished first.
func WaitGroup(ctx context.Context, wg *sync.WaitGroup) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// MaxConcurrent is the bound on runs executing at once.
func (p *Pool) MaxConcurrent() int { return p.opts.MaxConcurrent }

// validKey is the form of a workspace key, a directory name under PoolOptions.Dir: lower-case
// alphanumerics, '-' and '.', alphanumeric at both ends (the form of a DNS-1123 subdomain, as
// Kubernetes object names have it), so that a key is one path element and never "." or "..".
var validKey = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// Busy reports whether a run of key is waiting or running in this pool: a lock its run holds is
// alive and must not be taken.
func (p *Pool) Busy(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.workspaces[key]
	return ok && s.busy > 0
}

// do runs fn with exclusive use of key's workspace while holding one of the pool's slots. It waits
// for a slot, in turn with other tenants' runs (queue.Slots), until ctx is done; queued, when set,
// is told the run's place in line if it has to wait. A ctx already done starts nothing (shutdown
// stops starting runs).
func (p *Pool) do(ctx context.Context, key, tenant string, queued func(position, waiting int), fn func(*Workspace) error) error {
	if !validKey.MatchString(key) {
		return fmt.Errorf("invalid workspace key %q", key)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.opts.Drain.Draining() {
		return queue.ErrDraining
	}
	p.mu.Lock()
	s, ok := p.workspaces[key]
	if !ok {
		s = &slot{}
		p.workspaces[key] = s
	}
	s.busy++
	p.running.Add(1)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		s.busy--
		p.mu.Unlock()
		p.running.Done()
	}()

	s.mu.Lock()
	defer s.mu.Unlock()
	waitStart := time.Now()
	waitCtx, stopWaiting := p.opts.Drain.UntilBegun(ctx)
	err := p.slots.Acquire(waitCtx, tenant, queued)
	stopWaiting()
	if err == nil && (ctx.Err() != nil || p.opts.Drain.Draining()) {
		p.slots.Release() // handed a slot as ctx ended or the drain began: still start nothing
		err = context.Canceled
	}
	if err != nil {
		if ctx.Err() == nil && p.opts.Drain.Draining() {
			return queue.ErrDraining
		}
		return err
	}
	if o := p.opts.Observer; o != nil {
		o.SlotAcquired(time.Since(waitStart))
		defer o.SlotReleased()
	}
	defer p.slots.Release()
	if s.ws == nil {
		ws, err := NewWorkspace(filepath.Join(p.opts.Dir, key), p.opts.Binary, p.opts.Env, p.opts.GracePeriod)
		if err != nil {
			return err
		}
		s.ws = ws
	}
	err = fn(s.ws)
	// Granted credentials and the rendered variables live only as long as the operation.
	if derr := s.ws.files.dropCredentials(); derr != nil && err == nil {
		err = fmt.Errorf("deleting the run's credentials and variables: %w", derr)
	}
	if err != nil {
		// Nothing of a run outlives it: plugins a killed or interrupted Terraform left are killed
		// with it. A run that succeeded ended its processes itself, so the hot path scans nothing.
		procs.Reap(s.ws.Dir(), false)
	}
	return err
}

// prepare writes spec into the workspace and, when its init key changed, links it to the shared
// initialised directory of that key (running init there once per key; see shared.go). It reports
// whether init ran.
func (p *Pool) prepare(ctx context.Context, ws *Workspace, spec Spec) (bool, error) {
	needsInit, err := ws.Prepare(spec)
	if err != nil {
		return false, err
	}
	if !needsInit && ws.shared.current() {
		return false, ws.shared.verify()
	}
	// A new init key, a shared init removed since, or a workspace initialised before this process
	// started (linked on disk; attached to its shared init here, so that it is verified).
	s, ran, err := p.shared(ctx, ws, spec)
	if err != nil {
		return false, err
	}
	if needsInit || ran || ws.shared != nil {
		if err := ws.link(s); err != nil {
			return ran, err
		}
	}
	ws.shared = s
	return ran, s.verify()
}

// Signal sends sig to every process of key's run (Terraform, its providers and provisioners,
// found by EnvWorkspace; warm providers, shared between runs, are not): SIGSTOP freezes the run,
// SIGCONT thaws it, SIGKILL ends it. It returns how many processes it signalled. A runner fences
// a run whose lease expired with it (internal/runners).
func (p *Pool) Signal(key string, sig syscall.Signal) int {
	if !validKey.MatchString(key) {
		return 0
	}
	return procs.Signal(filepath.Join(p.opts.Dir, key), false, sig)
}

// Forget removes key's workspace directory; the next run of key starts with init.
func (p *Pool) Forget(key string) {
	if !validKey.MatchString(key) {
		return
	}
	p.mu.Lock()
	s := p.workspaces[key]
	delete(p.workspaces, key)
	p.mu.Unlock()
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	_ = os.RemoveAll(filepath.Join(p.opts.Dir, key))
}
