package tfrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// One init per module version. Workspaces whose init would be identical — same binary, module
// address and backend block (initKey) — share one initialised data directory: init runs once, in
// Dir/.modules/<key>, and each workspace's .terraform is a symbolic link to that directory's
// .terraform (the module manifest's paths are relative to the working directory, so they resolve
// through the link) with a copy of its dependency lock file. With the state server's http backend,
// configured per run from TF_HTTP_* variables, every resource of a module version has the same
// backend block, so 1,000 claims of one class cost one init. Runs only read the shared directory
// (providers, modules, the backend's settings); init is the only writer, and the sandbox grants
// runs nothing more (confine.go). Before every run the directory's digest (digest.go) is checked
// against the one taken when init ended: a module file, lock file or provider link changed since
// is refused, never executed, and the directory is initialised again by the next run.

// sharedInit is one initialised data directory.
type sharedInit struct {
	mu     sync.Mutex
	dir    string
	ready  bool
	schema *ModuleSchema
	digest string // of the directory when init ended (or when this process first used it)
}

// current reports whether s is set and still initialised (not removed after a failed verify).
func (s *sharedInit) current() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready
}

// verify checks the directory against its digest and returns a *RunError when it changed since
// init: the directory is then removed and marked not ready, so that the next run initialises it
// again.
func (s *sharedInit) verify() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, err := dirDigest(s.dir)
	if err != nil {
		return err
	}
	if s.digest == "" || !s.ready {
		s.digest = got
		return nil
	}
	if got == s.digest {
		return nil
	}
	s.ready, s.digest = false, ""
	_ = os.RemoveAll(s.dir)
	return &RunError{Op: "init", Message: fmt.Sprintf("the shared init of this module version (%s) changed after init: a module file, "+
		"the dependency lock file or a provider link was modified; nothing of it was run, and the next run initialises it again", s.dir)}
}

// shared returns the initialised directory for ws's init key, running init there first when it is
// not yet, and reports whether init ran. spec (with the run's env) is the one the triggering run
// uses: init may read the state through the backend.
func (p *Pool) shared(ctx context.Context, ws *Workspace, spec Spec) (*sharedInit, bool, error) {
	key, err := initKey(ws.bin, ws.spec)
	if err != nil {
		return nil, false, err
	}
	p.mu.Lock()
	if p.sharedInits == nil {
		p.sharedInits = map[string]*sharedInit{}
	}
	s, ok := p.sharedInits[key]
	if !ok {
		s = &sharedInit{dir: filepath.Join(p.opts.Dir, wsfs.SharedDirName, key[:24])}
		p.sharedInits[key] = s
	}
	p.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return s, false, nil
	}
	s.digest = ""
	init, err := NewWorkspace(s.dir, ws.bin, ws.baseEnv, ws.grace)
	if err != nil {
		return nil, false, err
	}
	init.initializer = true
	// init talks to no cluster and no cloud, and evaluates no variable: the shared directory, which
	// runs of every class that names this module read, never holds credentials nor any class's or
	// resource's values (its variables file is "{}").
	spec.Kubeconfig, spec.Identity = nil, nil
	spec.Variables, spec.SensitiveVariables, spec.EphemeralVariables = nil, nil, nil
	needsInit, err := init.Prepare(spec)
	if err != nil {
		return nil, false, err
	}
	ran := false
	if needsInit {
		p.initMu.Lock()
		defer p.initMu.Unlock()
		if err := init.Init(ctx); err != nil {
			return nil, false, err
		}
		ran = true
	}
	s.schema, s.ready = init.Schema(), true
	return s, ran, nil
}

// Inits are serialised across the pool, for both binaries. Terraform's plugin cache is not safe
// for concurrent installs (its documentation says so). OpenTofu >= 1.10 locks its cache, yet in
// the bench-scale baseline (tofu 1.12.6, two inits at once into an empty shared cache) an apply
// still found its provider directory missing while another init filled the cache. With one init
// per module version they are rare, so serialising them costs nothing that matters.

// link makes w use the shared initialised directory s: .terraform becomes a link to s's, the lock
// file is copied, the root module is written with the module's outputs, and the init stamp is set.
func (w *Workspace) link(s *sharedInit) error {
	data := filepath.Join(w.dir, ".terraform")
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(s.dir, ".terraform"), data); err != nil {
		return fmt.Errorf("linking the shared init: %w", err)
	}
	lock, err := wsfs.ReadIn(s.dir, lockFile)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if err == nil {
		if err := wsfs.WriteAtomic(filepath.Join(w.dir, lockFile), lock, 0o600); err != nil {
			return err
		}
	}
	w.schema, w.shared = s.schema, s
	if err := w.files.writeRoot(w.spec, w.schema); err != nil {
		return err
	}
	key, err := initKey(w.bin, w.spec)
	if err != nil {
		return err
	}
	return wsfs.WriteAtomic(filepath.Join(w.dir, stampFile), []byte(key), 0o600)
}

// lockFile is Terraform's dependency lock file.
const lockFile = ".terraform.lock.hcl"
