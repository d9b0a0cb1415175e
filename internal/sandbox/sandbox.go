// Package sandbox starts a run's processes (Terraform or OpenTofu, its providers, whatever a
// module's provisioners execute) inside a Landlock domain that cannot open what the process that
// started them holds: the ServiceAccount tokens under /var/run/secrets, the kubeconfig the
// controller uses, a runner's run-protocol token, and other runs' working directories.
//
// It works as a re-exec: Command rewrites a command so that this program starts first; Enter, the
// first call of main, recognizes the rewrite, restricts itself (Landlock, no_new_privs) and execs
// the real command, which inherits the domain with everything it starts. A domain also keeps its
// processes from ptrace-ing (and reading /proc/PID/environ, /proc/PID/mem or /proc/PID/root of) any
// process outside it, and, from Landlock ABI 6 on, from signalling one.
//
// Landlock needs Linux 5.13 or later with the landlock LSM enabled; the container's seccomp
// profile must allow its three system calls (containerd's and Docker's RuntimeDefault do).
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// envSpec carries a rewritten command's Spec (JSON) from Command to Enter. Enter removes it before
// the real command starts.
const envSpec = "CONDUCTOR_TF_SANDBOX"

// ExitSandboxFailed is the exit status of a command whose sandbox could not be entered (the
// reason is on its stderr). It matches a shell's "found but cannot execute".
const ExitSandboxFailed = 126

// ErrUnavailable is returned by New when the kernel has no Landlock.
var ErrUnavailable = errors.New("landlock is not available (Linux 5.13 or later with the landlock LSM is needed, and a seccomp profile that allows it)")

// Sandbox is a set of paths hidden from runs, with exceptions. The zero value and nil hide nothing;
// a *Sandbox is safe for concurrent use (it is never modified after New).
type Sandbox struct {
	exe   string
	hide  []string
	allow []string
}

// Spec is what Enter applies before it execs Exec: Hide are absolute paths whose files the command
// cannot open (read, write or execute; the names in a hidden directory can still be listed), Allow
// are paths inside hidden ones that it can open all the same. Their symbolic links are resolved
// when the command starts, so that a link the kubelet swaps (a projected token's ..data) is
// followed to its target of the moment.
type Spec struct {
	Exec  string   `json:"exec"`
	Hide  []string `json:"hide"`
	Allow []string `json:"allow,omitempty"`
}

// ABI returns the kernel's Landlock ABI version: 0 when Landlock is unavailable.
func ABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// New returns a Sandbox that hides hide from the commands it rewrites, except allow (paths inside
// hidden ones that every command may open). Paths are made absolute; those that do not exist now
// are left out. It returns ErrUnavailable when the kernel has no Landlock, and an error when a
// path resolves to the root directory or this program's own path cannot be found.
func New(hide, allow []string) (*Sandbox, error) {
	if ABI() < 1 {
		return nil, ErrUnavailable
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("sandbox: finding this program: %w", err)
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, fmt.Errorf("sandbox: finding this program: %w", err)
	}
	s := &Sandbox{exe: exe}
	if s.hide, err = absolute(hide, false); err != nil {
		return nil, err
	}
	if resolved, err := absolute(s.hide, true); err != nil {
		return nil, err
	} else if slices.Contains(resolved, "/") {
		return nil, errors.New("sandbox: the root directory cannot be hidden")
	}
	if s.allow, err = absolute(allow, false); err != nil {
		return nil, err
	}
	return s, nil
}

// Hidden is the sandbox's hidden paths.
func (s *Sandbox) Hidden() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.hide)
}

// Command rewrites the command path with environment env (the command's whole environment) so that
// it runs inside the sandbox, with allow (absolute paths, e.g. the run's working directory) open to
// it besides the sandbox's own exceptions. It returns this program's path and env with the Spec
// added; on a nil Sandbox it returns path and env unchanged. path must be absolute.
func (s *Sandbox) Command(path string, env map[string]string, allow ...string) (string, map[string]string) {
	if s == nil || len(s.hide) == 0 {
		return path, env
	}
	spec := Spec{Exec: path, Hide: s.hide, Allow: append(slices.Clone(s.allow), allow...)}
	data, _ := json.Marshal(spec) // strings only: cannot fail
	out := maps.Clone(env)
	if out == nil {
		out = map[string]string{}
	}
	out[envSpec] = string(data)
	return s.exe, out
}

// Enter is the first call of main of every program whose Sandbox rewrites commands (and of every
// test binary that runs them). When this process was started by a rewritten command it enters the
// sandbox and execs the real command, and never returns: if the sandbox cannot be entered it
// prints why on stderr and exits with ExitSandboxFailed, the command never running unconfined.
// Otherwise it returns at once.
func Enter() {
	data, ok := os.LookupEnv(envSpec)
	if !ok {
		return
	}
	_ = os.Unsetenv(envSpec)
	var spec Spec
	err := json.Unmarshal([]byte(data), &spec)
	if err == nil && !filepath.IsAbs(spec.Exec) {
		err = fmt.Errorf("command %q is not an absolute path", spec.Exec)
	}
	if err == nil {
		err = Restrict(spec.Hide, spec.Allow)
	}
	if err == nil {
		argv := append([]string{spec.Exec}, os.Args[1:]...)
		err = syscall.Exec(spec.Exec, argv, os.Environ())
	}
	fmt.Fprintf(os.Stderr, "conductor-tf sandbox: %v\n", err)
	os.Exit(ExitSandboxFailed)
}

// Restrict confines this process, and every process it starts from then on, so that no file under
// hide can be opened, except under allow. It grants every file system right on every sibling of
// each hidden path and of its ancestors, and only listing on the ancestors themselves; a sibling
// that is a symbolic link into a hidden path is left out. Landlock rights the kernel lacks are
// dropped (best effort from ABI 1 on); signals to processes outside the domain are refused from
// ABI 6 on. It returns ErrUnavailable without Landlock.
func Restrict(hide, allow []string) error {
	if ABI() < 1 {
		return ErrUnavailable
	}
	hide, err := absolute(hide, true)
	if err != nil {
		return err
	}
	if slices.Contains(hide, "/") {
		return errors.New("the root directory cannot be hidden")
	}
	if allow, err = absolute(allow, true); err != nil {
		return err
	}
	rules := rulesFor(hide, allow)
	cfg := landlock.Config{
		HandledAccessFS: landlock.V6.HandledAccessFS,
		Scoped:          landlock.ScopedSet(llsys.ScopeSignal),
	}
	if err := cfg.BestEffort().Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// rulesFor returns the Landlock rules that open everything but hide (resolved absolute paths),
// and allow again.
func rulesFor(hide, allow []string) []landlock.Rule {
	ancestors := map[string]bool{}
	for _, h := range hide {
		for d := filepath.Dir(h); ; d = filepath.Dir(d) {
			ancestors[d] = true
			if d == "/" {
				break
			}
		}
	}
	// blocked reports whether opening p (resolved) would reach into a hidden path: p is hidden, is
	// inside a hidden path, or is an ancestor of one (granting it would grant what is beneath).
	blocked := func(p string) bool {
		if ancestors[p] {
			return true
		}
		for _, h := range hide {
			if p == h || strings.HasPrefix(p, h+"/") {
				return true
			}
		}
		return false
	}
	var rules []landlock.Rule
	for _, a := range slices.Sorted(maps.Keys(ancestors)) {
		rules = append(rules, landlock.PathAccess(llsys.AccessFSReadDir, a))
		entries, err := os.ReadDir(a)
		if err != nil {
			continue // an ancestor this process cannot list: nothing in it is granted
		}
		for _, e := range entries {
			p := filepath.Join(a, e.Name())
			if blocked(p) {
				continue
			}
			r, err := filepath.EvalSymlinks(p)
			if err != nil || blocked(r) {
				continue
			}
			if rule, ok := fullAccess(r); ok {
				rules = append(rules, rule)
			}
		}
	}
	for _, p := range allow {
		if rule, ok := fullAccess(p); ok {
			rules = append(rules, rule)
		}
	}
	return rules
}

// fullAccess is every right on p: a directory's for a directory, a file's otherwise. It reports
// false when p does not exist.
func fullAccess(p string) (landlock.Rule, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, false
	}
	if fi.IsDir() {
		return landlock.RWDirs(p).WithRefer().WithIoctlDev(), true
	}
	return landlock.RWFiles(p).WithIoctlDev(), true
}

// absolute makes paths absolute, resolving their symbolic links when resolve is set, and leaves
// out duplicates, paths that do not exist and paths this process may not reach (which a run,
// running as the same user, may not reach either).
func absolute(paths []string, resolve bool) ([]string, error) {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("sandbox: %s: %w", p, err)
		}
		if resolve {
			abs, err = filepath.EvalSymlinks(abs)
		} else {
			_, err = os.Stat(abs)
		}
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sandbox: %s: %w", p, err)
		}
		if !slices.Contains(out, abs) {
			out = append(out, abs)
		}
	}
	return out, nil
}
