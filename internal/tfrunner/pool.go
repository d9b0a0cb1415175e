package tfrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"
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
	WarmProviders *WarmProviders
	// Drain, when set, is the manager's shutdown: once it begins, runs waiting for a slot are
	// refused (ErrDraining) and runs under way go on (see Drain).
	Drain *Drain
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
type Pool struct {
	opts   PoolOptions
	slots  *fairSlots
	initMu sync.Mutex

	mu          sync.Mutex
	workspaces  map[string]*slot
	sharedInits map[string]*sharedInit
	// running counts the runs inside do (waiting or running), for Wait.
	running sync.WaitGroup
}

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
	Reap(opts.Dir, true)
	return &Pool{opts: opts, slots: newFairSlots(opts.MaxConcurrent), workspaces: map[string]*slot{}}, nil
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
// for a slot, in turn with other tenants' runs (fairSlots), until ctx is done; queued, when set,
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
		return ErrDraining
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
	waitCtx, stopWaiting := p.opts.Drain.untilBegun(ctx)
	err := p.slots.acquire(waitCtx, tenant, queued)
	stopWaiting()
	if err == nil && (ctx.Err() != nil || p.opts.Drain.Draining()) {
		p.slots.release() // handed a slot as ctx ended or the drain began: still start nothing
		err = context.Canceled
	}
	if err != nil {
		if ctx.Err() == nil && p.opts.Drain.Draining() {
			return ErrDraining
		}
		return err
	}
	if o := p.opts.Observer; o != nil {
		o.SlotAcquired(time.Since(waitStart))
		defer o.SlotReleased()
	}
	defer p.slots.release()
	if s.ws == nil {
		ws, err := NewWorkspace(filepath.Join(p.opts.Dir, key), p.opts.Binary, p.opts.Env, p.opts.GracePeriod)
		if err != nil {
			return err
		}
		s.ws = ws
	}
	err = fn(s.ws)
	// Granted credentials live only as long as the operation.
	if derr := s.ws.dropCredentials(); derr != nil && err == nil {
		err = fmt.Errorf("deleting the run's kubeconfig: %w", derr)
	}
	if err != nil {
		// Nothing of a run outlives it: plugins a killed or interrupted Terraform left are killed
		// with it. A run that succeeded ended its processes itself, so the hot path scans nothing.
		Reap(s.ws.Dir(), false)
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

// ApplyOptions are what Apply does besides plan and apply, as data, and where its events go.
type ApplyOptions struct {
	// CheckInputs checks the spec's variables against the module's inputs after init, before
	// anything is planned (CheckInputs); a misfit stops the run with *InputError.
	CheckInputs bool
	// Imports are imported, before planning, when their address is not in state yet.
	Imports []ImportTarget
	// Gate, when set, makes the run stop between plan and apply: plan to a file, read it (show
	// -json), decide (Gate.Decide), then apply that very plan or return it in ApplyResult.Held.
	// Without it (the common path) the run is one process, apply -auto-approve -json. Runs with
	// Imports always use a saved plan (a nil Gate then holds nothing).
	Gate *Gate
	// Events receives the run's events (Queued, Started, CreateStarted, Applying); nil drops them.
	Events Events
}

// ImportTarget is an existing object to import: a resource address inside the module and its id.
type ImportTarget struct{ Address, ID string }

// ImportResult is the outcome of one import.
type ImportResult struct {
	Address, ID string
	// Imported is false when the address was already in state (nothing ran).
	Imported bool
	Err      error
}

// ApplyResult is what Apply did.
type ApplyResult struct {
	// Initialized is true when init ran.
	Initialized bool
	// Schema is the module's declared inputs and outputs.
	Schema *ModuleSchema
	// Imports lists each import's outcome.
	Imports []ImportResult
	// Plan is the plan made; Applied says whether it was applied (only plans with changes are).
	Plan    *Plan
	Applied bool
	// Held is the saved plan the Gate stopped before apply (nil when none); Applied is then false.
	Held *Hold
	// Resolutions are the decisions about the Gate's creates in doubt (Gate.ResolveCreates).
	Resolutions []Resolution
	// Ended are the addresses whose apply ended with the provider's answer (apply_complete or
	// apply_errored), in order, also when the run failed: the creates among them are no longer in
	// doubt. A create cut off by an interrupt or a kill is not among them.
	Ended []string
	// Outputs are the root outputs after the run.
	Outputs map[string]Output
	// Log is the run's output as people read it (the human-readable messages of the -json stream,
	// or the plan and apply output), sensitive values redacted by Terraform; at most MaxLogBytes.
	Log string
}

// MaxLogBytes bounds a run's log (ApplyResult.Log): 512 KiB, the end kept.
const MaxLogBytes = 512 << 10

// ErrStopped wraps the error an Events sink returned to stop a run.
var ErrStopped = errors.New("run stopped")

// Apply brings key's infrastructure to spec: init when needed, the input check, imports, plan,
// opts' Gate and apply when the plan has changes and passes, then outputs. The result is returned
// with what was done so far even when an error stops the run; a held plan is a result (Held), not
// an error. Errors are *InputError, *RunError or *LockError from Terraform, ErrStopped-wrapped
// errors from opts.Events, or context errors.
func (p *Pool) Apply(ctx context.Context, key string, spec Spec, opts ApplyOptions) (*ApplyResult, error) {
	res := &ApplyResult{}
	err := p.do(ctx, key, spec.Tenant, opts.Events.QueuedFunc(), func(ws *Workspace) error {
		if err := opts.Events.Send(Started{}); err != nil {
			return fmt.Errorf("%w: %w", ErrStopped, err)
		}
		var err error
		if res.Initialized, err = p.prepare(ctx, ws, spec); err != nil {
			return err
		}
		res.Schema = ws.Schema()
		if opts.CheckInputs {
			if err := CheckInputs(spec, res.Schema); err != nil {
				return err
			}
		}
		if err := importAll(ctx, ws, opts.Imports, res); err != nil {
			return err
		}
		if opts.Gate, err = resolveGate(ctx, ws, opts.Gate, res); err != nil {
			return err
		}
		if opts.Gate == nil && len(opts.Imports) == 0 {
			return p.applyJSON(ctx, ws, res, opts.Events.createStarts())
		}
		var log strings.Builder
		defer func() { res.Log = tailBytes(log.String(), MaxLogBytes) }()
		if res.Plan, err = ws.Plan(ctx, PlanOptions{Log: &log}); err != nil {
			return err
		}
		if res.Plan.HasChanges {
			if res.Held, err = decide(ctx, ws, opts.Gate, res.Plan); err != nil || res.Held != nil {
				return err
			}
			if err := opts.Events.Send(Applying{Plan: res.Plan}); err != nil {
				return fmt.Errorf("%w: %w", ErrStopped, err)
			}
			ended, err := ws.Apply(ctx, res.Plan, &log, opts.Events.createStarts())
			res.Ended = ended
			if err != nil {
				return err
			}
			res.Applied = true
		}
		res.Outputs, err = ws.Outputs(ctx)
		return err
	})
	p.tagErrored(key, spec.RunID)
	return res, err
}

// importAll imports each of imports whose address is not in state yet, recording each outcome in
// res; the first failed import stops.
func importAll(ctx context.Context, ws *Workspace, imports []ImportTarget, res *ApplyResult) error {
	if len(imports) == 0 {
		return nil
	}
	inState, err := ws.StateAddresses(ctx)
	if err != nil {
		return err
	}
	for _, imp := range imports {
		r := ImportResult{Address: ModuleAddress(imp.Address), ID: imp.ID}
		if !slices.Contains(inState, r.Address) {
			r.Imported = true
			r.Err = ws.Import(ctx, imp.Address, imp.ID)
		}
		res.Imports = append(res.Imports, r)
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// decide applies gate to saved plan p: the Hold, with Terraform's rendering of the plan when
// people have not seen it yet (one more command, show -no-color), or nil when p may be applied.
// A plan that cannot be rendered is held with a rendering that says why.
func decide(ctx context.Context, ws *Workspace, gate *Gate, p *Plan) (*Hold, error) {
	if gate == nil {
		return nil, nil
	}
	h := gate.Decide(p)
	if h == nil || !gate.NeedsRendering(h) {
		return h, nil
	}
	text, err := ws.ShowPlanText(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		text = "the plan could not be rendered: " + err.Error()
	}
	h.Rendering = text
	return h, nil
}

// applyJSON is the common run: one apply -json gives the plan, the apply and the non-sensitive
// outputs; output -json runs only when the module has sensitive outputs, for their values.
func (p *Pool) applyJSON(ctx context.Context, ws *Workspace, res *ApplyResult, onCreate CreateStartFunc) error {
	var extra []tfexec.ApplyOption
	release := func(bool) {}
	if wp := p.opts.WarmProviders; wp != nil && !ws.spec.ColdProviders {
		if provs := wp.warmable(ws.Dir(), installedProviders(ws.Dir())); len(provs) > 0 {
			// A provider that cannot be started warm is started by the run itself, as without.
			lock := filepath.Join(ws.Dir(), lockFile)
			if ws.shared != nil {
				lock = filepath.Join(ws.shared.dir, lockFile) // init's, which no run can write
			}
			if info, dirs, rel, err := wp.checkout(ctx, provs, lock, ws.spec.Tenant, ws.spec.Class, ws.spec.Module, ws.runEnv()); err == nil {
				extra, release = []tfexec.ApplyOption{tfexec.Reattach(info)}, rel
				ws.connect = dirs
				defer func() { ws.connect = nil }()
			}
		}
	}
	stream, err := ws.ApplyJSON(ctx, onCreate, extra...)
	release(err == nil && ctx.Err() == nil)
	if stream != nil {
		res.Log = tailBytes(strings.Join(stream.Log, "\n"), MaxLogBytes)
		res.Plan = stream.Plan
		res.Applied = stream.Applied != nil && stream.Plan.HasChanges
		res.Outputs = stream.Outputs
		res.Ended = stream.Ended
	}
	if err != nil {
		return err
	}
	for _, o := range res.Outputs {
		if o.Sensitive {
			res.Outputs, err = ws.Outputs(ctx)
			return err
		}
	}
	return nil
}

// DriftCheck plans key's infrastructure read-only (no lock, no saved plan, nothing written): what
// applying would change now, and which objects changed outside Terraform. It waits for a slot as
// runs do. Errors as for Workspace.DriftCheck.
func (p *Pool) DriftCheck(ctx context.Context, key string, spec Spec) (*StreamResult, error) {
	var res *StreamResult
	err := p.do(ctx, key, spec.Tenant, nil, func(ws *Workspace) error {
		if _, err := p.prepare(ctx, ws, spec); err != nil {
			return err
		}
		var err error
		res, err = ws.DriftCheck(ctx)
		return err
	})
	return res, err
}

// tailBytes keeps the last n bytes of s, marking the cut.
func tailBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…(earlier output cut)\n" + s[len(s)-n:]
}

// Destroy destroys everything in key's state (init first when needed), then forgets the workspace.
func (p *Pool) Destroy(ctx context.Context, key string, spec Spec) error {
	err := p.do(ctx, key, spec.Tenant, nil, func(ws *Workspace) error {
		if _, err := p.prepare(ctx, ws, spec); err != nil {
			return err
		}
		return ws.Destroy(ctx)
	})
	p.tagErrored(key, spec.RunID)
	if err == nil {
		p.Forget(key)
	}
	return err
}

// erroredStateFile is where Terraform writes the state it could not save to its backend, in the
// working directory ("Failed to save state … written to errored.tfstate").
const erroredStateFile = "errored.tfstate"

// erroredRunFile names, beside errored.tfstate, the run that left it (tagErrored).
const erroredRunFile = "errored.tfstate.run"

// ErroredState is a state a run could not save to its backend (Terraform's errored.tfstate) and
// the run that produced it (Spec.RunID; "" when the run had no ID). It is kept only for that run:
// a later run of the key never carries it under its own ID.
type ErroredState struct {
	RunID string
	State []byte
}

// Signal sends sig to every process of key's run (Terraform, its providers and provisioners,
// found by EnvWorkspace; warm providers, shared between runs, are not): SIGSTOP freezes the run,
// SIGCONT thaws it, SIGKILL ends it. It returns how many processes it signalled. A runner fences
// a run whose lease expired with it (internal/runners).
func (p *Pool) Signal(key string, sig syscall.Signal) int {
	if !validKey.MatchString(key) {
		return 0
	}
	return signalRun(filepath.Join(p.opts.Dir, key), false, sig)
}

// ErroredState returns the errored state key's workspace holds, with the run that left it
// (tagErrored); false when there is none.
func (p *Pool) ErroredState(key string) (ErroredState, bool) {
	if !validKey.MatchString(key) {
		return ErroredState{}, false
	}
	dir := filepath.Join(p.opts.Dir, key)
	data, err := os.ReadFile(filepath.Join(dir, erroredStateFile))
	if err != nil || len(data) == 0 {
		return ErroredState{}, false
	}
	runID, _ := os.ReadFile(filepath.Join(dir, erroredRunFile))
	return ErroredState{RunID: string(runID), State: data}, true
}

// tagErrored records runID as the producer of the errored state a run of key just left, if any
// and not tagged yet (a run starts only once an earlier run's errored state is kept or dropped,
// Router).
func (p *Pool) tagErrored(key, runID string) {
	if !validKey.MatchString(key) {
		return
	}
	dir := filepath.Join(p.opts.Dir, key)
	if _, err := os.Stat(filepath.Join(dir, erroredStateFile)); err != nil {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, erroredRunFile)); err == nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dir, erroredRunFile), []byte(runID), 0o600)
}

// ClearErroredState removes key's errored.tfstate (and its tag) once its state is saved.
func (p *Pool) ClearErroredState(key string) {
	if validKey.MatchString(key) {
		_ = os.Remove(filepath.Join(p.opts.Dir, key, erroredStateFile))
		_ = os.Remove(filepath.Join(p.opts.Dir, key, erroredRunFile))
	}
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
