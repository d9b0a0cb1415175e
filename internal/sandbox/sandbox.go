// Package sandbox starts a run's processes (Terraform or OpenTofu, its providers, whatever a
// module's provisioners execute) inside a Landlock domain that may do only what it is granted: an
// allow-list. A run may
//
//	| path                                                    | read, execute | write, create, remove | connect (Unix sockets) |
//	|---------------------------------------------------------|---------------|-----------------------|------------------------|
//	| the system (System: /usr, /bin, /lib*, /etc, /sys)      | yes           | no                    | no                     |
//	| device files under /dev (/dev/null, /dev/urandom, …)    | yes           | existing files only   | no                     |
//	| what the Sandbox grants every run (Base: the binary,    | yes           | only Base.Write       | no                     |
//	| the CLI configuration, the provider mirror, CA files)   |               |                       |                        |
//	| what the command is granted (Access: its workspace;     | Read, Write   | Write                 | Write, Connect         |
//	| the shared init, plugin cache and module sources read)  |               |                       |                        |
//	| everything else: other runs' workspaces, /proc, /tmp,   | no            | no                    | no (Landlock ABI 9+;   |
//	| the manager's files, tokens, the kubeconfig             |               |                       | below: see Connect)    |
//
// Hidden paths (tokens under /var/run/secrets, the kubeconfig, the manager's work directory) are
// refused even where System or an Access.Read grant would cover them (a kubeconfig under /etc, a
// class whose local module source is /); Access.Trusted, Write and Connect are granted as named
// (the run's own workspace and shared init inside the hidden work directory).
//
// It works as a re-exec: Command rewrites a command so that this program starts first; Enter, the
// first call of main, recognizes the rewrite, restricts itself (Landlock, no_new_privs) and execs
// the real command, which inherits the domain with everything it starts. A domain also keeps its
// processes from ptrace-ing (and reading /proc/PID/environ, /proc/PID/mem or /proc/PID/root of) any
// process outside it and, from Landlock ABI 6 on, from signalling one or connecting to an abstract
// Unix socket made outside it (SignalsScoped).
//
// Landlock needs Linux 5.13 or later with the landlock LSM enabled; the container's seccomp
// profile must allow its three system calls (containerd's and Docker's RuntimeDefault do). Rights
// a kernel lacks are dropped (best effort): below ABI 9 connect() on a pathname Unix socket is not
// mediated, so a socket that must stay private to some runs lives in a directory no run may list,
// named by a secret (tfrunner's warm providers).
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

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

// System are the directories of the system that every run may read and execute (those that exist).
var System = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys"}

// SystemFiles are files of the system that are often symbolic links out of System (resolv.conf to
// /run/systemd/resolve, localtime to /usr/share/zoneinfo): their targets are granted read too.
var SystemFiles = []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/localtime", "/etc/ssl/certs/ca-certificates.crt"}

// Devices is the directory of device files: a run may read and write the files that exist there
// (/dev/null, /dev/urandom, /dev/tty) and create nothing.
const Devices = "/dev"

// Access is what one command may do with the file system besides System and Devices. Paths are
// absolute; those that do not exist when the command starts are left out.
type Access struct {
	// Read are files and directories (with everything beneath) it may read and execute; hidden
	// paths inside them stay refused. Paths a class or claim names (a local module source) go here.
	Read []string `json:"read,omitempty"`
	// Trusted are files and directories it may read and execute as named, even inside a hidden
	// path: only what the sandbox's owner names (the binary, the CLI configuration, a run's shared
	// init and the plugin cache in the hidden work directory), never a path from a class or claim.
	Trusted []string `json:"trusted,omitempty"`
	// Write are directories (or files) it may read, execute, write, create and remove in, and
	// connect to the Unix sockets in.
	Write []string `json:"write,omitempty"`
	// Connect are directories whose Unix sockets it may connect to (enforced from Landlock ABI 9;
	// below it any socket whose path is known can be connected to).
	Connect []string `json:"connect,omitempty"`
}

// join is a and b together.
func (a Access) join(b Access) Access {
	return Access{
		Read:    append(slices.Clone(a.Read), b.Read...),
		Trusted: append(slices.Clone(a.Trusted), b.Trusted...),
		Write:   append(slices.Clone(a.Write), b.Write...),
		Connect: append(slices.Clone(a.Connect), b.Connect...),
	}
}

// Sandbox is what every command it rewrites may do (Base) and what none may open (hidden paths).
// The zero value and nil confine nothing; a *Sandbox is safe for concurrent use (it is never
// modified after New).
type Sandbox struct {
	exe  string
	base Access
	hide []string
}

// Spec is what Enter applies before it execs Exec: Access with System and Devices, minus Hide
// (absolute paths, refused inside System and Access.Read; Access.Trusted, Write and Connect are
// granted as named). Symbolic links are resolved when the command starts, so that a link the kubelet
// swaps (a projected token's ..data) is followed to its target of the moment.
type Spec struct {
	Exec   string   `json:"exec"`
	Access Access   `json:"access"`
	Hide   []string `json:"hide,omitempty"`
}

// ABI returns the kernel's Landlock ABI version: 0 when Landlock is unavailable.
func ABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// SignalsScoped reports whether the kernel's Landlock keeps a run from signalling processes outside
// its domain (ABI 6, Linux 6.12, on).
func SignalsScoped() bool { return ABI() >= 6 }

// SocketsMediated reports whether the kernel's Landlock mediates connect() on pathname Unix
// sockets (ABI 9 on), so that Access.Connect is enforced.
func SocketsMediated() bool { return ABI() >= 9 }

// New returns a Sandbox whose commands may do base (besides System and Devices, and what each
// command is granted) and may open nothing under hide. Paths are made absolute. It returns
// ErrUnavailable when the kernel has no Landlock, and an error when a hidden path resolves to the
// root directory or this program's own path cannot be found.
func New(base Access, hide []string) (*Sandbox, error) {
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
	for _, list := range []*[]string{&base.Read, &base.Trusted, &base.Write, &base.Connect} {
		if *list, err = absolute(*list, false); err != nil {
			return nil, err
		}
	}
	s.base = base
	return s, nil
}

// Hidden is the sandbox's hidden paths.
func (s *Sandbox) Hidden() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.hide)
}

// Base is what every command of the sandbox may do besides System and Devices.
func (s *Sandbox) Base() Access {
	if s == nil {
		return Access{}
	}
	return s.base.join(Access{})
}

// Command rewrites the command path with environment env (the command's whole environment) so that
// it runs inside the sandbox, granted a besides the sandbox's Base. It returns this program's path
// and env with the Spec added; on a nil Sandbox it returns path and env unchanged. path must be
// absolute, and is granted read and execute.
func (s *Sandbox) Command(path string, env map[string]string, a Access) (string, map[string]string) {
	if s == nil {
		return path, env
	}
	access := s.base.join(a)
	access.Trusted = append(access.Trusted, path)
	data, _ := json.Marshal(Spec{Exec: path, Access: access, Hide: s.hide}) // strings only: cannot fail
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
		err = Restrict(spec.Access, spec.Hide)
	}
	if err == nil {
		argv := append([]string{spec.Exec}, os.Args[1:]...)
		err = syscall.Exec(spec.Exec, argv, os.Environ())
	}
	fmt.Fprintf(os.Stderr, "conductor-tf sandbox: %v\n", err)
	os.Exit(ExitSandboxFailed)
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
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.ENOTDIR) {
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
