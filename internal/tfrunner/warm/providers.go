package warm

// Warm providers: provider plugin processes kept between runs, which Terraform and OpenTofu drive
// through provider reattach (TF_REATTACH_PROVIDERS, set by terraform-exec's Reattach option)
// instead of starting their own. A provider is started as Terraform starts one, as a
// hashicorp/go-plugin client with Terraform's handshake (start); the reattach information is the
// client's own (go-plugin's ReattachConfig), marked Test so that a run that attaches to the
// process never stops it: it serves until it is killed. The start-up it saves is most of a small
// apply.
//
// Isolation: a process is checked out by one run at a time, and is shared only by runs with the
// same key: the provider's address and binary (so its version), the run's tenant, class and module,
// and a hash of the environment the provider gets (the run's env, which holds provider
// credentials): a process never serves another class, nor the same class with other credentials.
// A run that fails, is cancelled, or was killed kills the processes it used; a process serves at
// most MaxRuns runs and waits idle at most IdleTimeout.
//
// Reach: Terraform's reattach speaks plaintext gRPC and carries no credential (go-plugin's AutoMTLS
// cannot be used: TF_REATTACH_PROVIDERS has no field for a certificate, nor can a descriptor be
// handed over), so below Landlock ABI 9, where the kernel does not mediate connect(2) on a pathname
// socket, the socket's path is the secret. The name a socket is bound to is public:
// NETLINK_SOCK_DIAG (ss -xl) lists it to any process in the pod, with no capability, and Landlock
// does not mediate it. So no run is ever told that name: once the process serves, its socket is
// renamed into a directory named by 128 random bits (moveSocket; the process accepts on the inode,
// and the bound name leads nowhere), and renamed again into a new one each time a run gives it
// back, so the path a run was told is dead before another run is. The directories are inside the
// warm providers' directory, which the sandbox grants no run (a run cannot list it) and hides; runs
// cannot read /proc nor another process's environment. Only the run a process is checked out to
// is told the current path (TF_REATTACH_PROVIDERS) and granted it (sandbox.Access.Connect,
// enforced by the kernel from Landlock ABI 9 on: then no other run can connect even knowing it).
// What this does not cover: a process of a run that outlives the run with a connection it opened
// during the run (runs' processes are killed when they end, Reap). A binary is started only when
// its package matches an h1 hash of the shared init's dependency lock file.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/conductor-tf/conductor-tf/internal/sandbox"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
)

// Defaults of Providers.
const (
	DefaultMaxRuns     = 100
	DefaultIdleTimeout = 2 * time.Minute
	warmStartTimeout   = 30 * time.Second
)

// providerHandshake is Terraform's plugin handshake (hashicorp/terraform internal/plugin/serve.go,
// Handshake; OpenTofu's is the same): a provider serves only when started with this cookie in its
// environment.
var providerHandshake = plugin.HandshakeConfig{
	MagicCookieKey:   "TF_PLUGIN_MAGIC_COOKIE",
	MagicCookieValue: "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2",
}

// providerProtocols are the plugin protocol versions offered to a provider, 5 and 6 as Terraform
// and OpenTofu offer them; the provider picks the newest it serves. No plugin is dispensed here:
// only the runs that reattach speak the protocol.
var providerProtocols = map[int]plugin.PluginSet{5: {}, 6: {}}

// Providers keeps provider processes between runs. The zero value is not usable: use
// New.
type Providers struct {
	// Providers names the providers kept warm, as "namespace/type" (hashicorp/random) or a full
	// address; the others start with their run as usual. Only list providers that read no file
	// relative to their working directory (a warm process runs in a directory of its own, not the
	// run's) and keep no state between configurations.
	Providers []string
	// MaxRuns is how many runs a process serves before it is killed (recycled).
	MaxRuns int
	// IdleTimeout is how long a process may wait for its next run before it is killed.
	IdleTimeout time.Duration
	// Sandbox, when set, confines every process started (sandbox.Sandbox); the processes' own
	// directory stays open to them.
	Sandbox *sandbox.Sandbox
	// dir is the procs.EnvWorkspace of every process started, so that Reap of the pool's directory
	// finds them.
	dir string

	mu      sync.Mutex
	idle    map[string][]*process // by key
	started int                   // processes started, ever (tests and metrics)
	closed  bool                  // Close was called: processes given back are killed
	aliases map[string]bool       // by module directory: the modules declare provider aliases
}

// New returns an empty set of warm providers whose processes carry procs.EnvWorkspace=dir.
func New(dir string) *Providers {
	return &Providers{MaxRuns: DefaultMaxRuns, IdleTimeout: DefaultIdleTimeout, dir: dir,
		idle: map[string][]*process{}, aliases: map[string]bool{}}
}

type process struct {
	key     string
	home    string         // its working directory, HOME and TMPDIR, named by a secret
	sockDir string         // the directory of its socket now, named by another (moveSocket)
	cmd     *exec.Cmd      // the process, in a process group of its own
	client  *plugin.Client // started cmd; reaps it and reports it exited
	config  tfexec.ReattachConfig
	runs    int
	idleAt  time.Time
}

// Binary is a provider installed in a workspace: its address (host/namespace/type, as
// the lock file names it) and executable.
type Binary struct{ Address, Path string }

// Owner is whose runs a process may serve (with the provider's binary and the environment it
// gets): the run's tenant (the claim's namespace), class, and module source and version.
type Owner struct{ Tenant, Class, Source, Version string }

// Installed lists the providers init installed for dir (.terraform/providers/<host>/
// <namespace>/<type>/<version>/<os_arch>/terraform-provider-*, links resolved), sorted by address.
func Installed(dir string) []Binary {
	paths, _ := filepath.Glob(filepath.Join(dir, ".terraform", "providers", "*", "*", "*", "*", "*", "terraform-provider-*"))
	var out []Binary
	for _, p := range paths {
		rel, err := filepath.Rel(filepath.Join(dir, ".terraform", "providers"), p)
		if err != nil {
			continue
		}
		parts := strings.Split(rel, string(filepath.Separator))
		// The workspace's .terraform links to the init it shares: the key is the binary itself.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		out = append(out, Binary{Address: strings.Join(parts[:3], "/"), Path: p})
	}
	slices.SortFunc(out, func(a, b Binary) int { return strings.Compare(a.Address, b.Address) })
	return out
}

// providerEnv is the environment a warm provider of a run gets: the run's, without what belongs to
// one run only (the state server's credentials, the state encryption passphrases, the workspace
// directory, its HOME and TMPDIR:
// start gives the process its own), with procs.EnvWorkspace naming the warm providers' directory.
func (wp *Providers) providerEnv(runEnv map[string]string) map[string]string {
	env := maps.Clone(runEnv)
	for k := range env {
		if strings.HasPrefix(k, "TF_HTTP_") || strings.HasPrefix(k, "TF_REATTACH") || k == "TF_ENCRYPTION" || k == "HOME" || k == "TMPDIR" {
			delete(env, k)
		}
	}
	env[procs.EnvWorkspace] = wp.dir
	return env
}

// warmKey is the key of a provider for a run (see the file's comment).
func warmKey(p Binary, owner Owner, env map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(h, "%d:%s=%d:%s\n", len(k), k, len(env[k]), env[k])
	}
	return strings.Join([]string{p.Address, p.Path, owner.Tenant, owner.Class, owner.Source, owner.Version, hex.EncodeToString(h.Sum(nil))}, "|")
}

// checkout takes, for each provider, a process of its key, started now when none is idle, and
// returns the reattach information for all of them, the directories of their sockets (which the
// run must be granted) and a release func: release(true) gives them back for later runs,
// release(false) kills them. lock is the dependency lock file a new process's package is checked
// against. An error (a provider that did not start, or whose package does not match the lock
// file) kills what was taken.
func (wp *Providers) Checkout(ctx context.Context, providers []Binary, lock string, owner Owner, runEnv map[string]string) (tfexec.ReattachInfo, []string, func(healthy bool), error) {
	env := wp.providerEnv(runEnv)
	var taken []*process
	var dirs []string
	release := func(healthy bool) {
		for _, p := range taken {
			wp.checkin(p, healthy)
		}
	}
	info := tfexec.ReattachInfo{}
	for _, pb := range providers {
		key := warmKey(pb, owner, env)
		p := wp.takeIdle(key)
		if p == nil {
			err := checkProviderPackage(lock, pb)
			if err == nil {
				p, err = wp.start(ctx, pb, key, env)
			}
			if err != nil {
				release(false)
				return nil, nil, nil, err
			}
		}
		taken = append(taken, p)
		dirs = append(dirs, p.sockDir)
		info[pb.Address] = p.config
	}
	return info, dirs, release, nil
}

// takeIdle pops an idle process of key, killing the ones idle for longer than IdleTimeout.
func (wp *Providers) takeIdle(key string) *process {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	wp.expireLocked(time.Now())
	list := wp.idle[key]
	if len(list) == 0 {
		return nil
	}
	p := list[len(list)-1]
	wp.idle[key] = list[:len(list)-1]
	if p.gone() { // exited while idle: the run starts a new one
		return nil
	}
	return p
}

// checkin gives p back after a run, or kills it: after a failed run, at MaxRuns, or when its
// process has exited.
func (wp *Providers) checkin(p *process, healthy bool) {
	p.runs++
	if !healthy || p.runs >= wp.MaxRuns || p.gone() {
		p.kill()
		return
	}
	wp.mu.Lock()
	defer wp.mu.Unlock()
	if wp.closed {
		p.kill()
		return
	}
	// The path the run was told reaches the process no more (a process the run left behind cannot
	// come back to it while it serves another run).
	if err := p.moveSocket(wp.dir); err != nil {
		p.kill()
		return
	}
	p.idleAt = time.Now()
	wp.idle[p.key] = append(wp.idle[p.key], p)
	// The idle timeout holds even when no run comes to expire it.
	time.AfterFunc(wp.IdleTimeout+time.Second, func() {
		wp.mu.Lock()
		defer wp.mu.Unlock()
		wp.expireLocked(time.Now())
	})
}

func (wp *Providers) expireLocked(now time.Time) {
	for key, list := range wp.idle {
		kept := list[:0]
		for _, p := range list {
			if now.Sub(p.idleAt) > wp.IdleTimeout {
				p.kill()
			} else {
				kept = append(kept, p)
			}
		}
		wp.idle[key] = kept
	}
}

// Started is how many provider processes were started so far.
func (wp *Providers) Started() int {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	return wp.started
}

// Close kills every idle process (a process checked out is killed when its run gives it back).
func (wp *Providers) Close() {
	wp.mu.Lock()
	defer wp.mu.Unlock()
	wp.closed = true
	for key, list := range wp.idle {
		for _, p := range list {
			p.kill()
		}
		delete(wp.idle, key)
	}
}
