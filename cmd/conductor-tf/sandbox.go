package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/sandbox"
)

// Run sandbox modes (--run-sandbox).
const (
	// sandboxAuto confines runs where the kernel has Landlock and runs them unconfined elsewhere
	// (a laptop without it), saying so once at start.
	sandboxAuto = "auto"
	// sandboxLandlock confines runs and refuses to start without Landlock: the installed manager
	// and runner pods use it.
	sandboxLandlock = "landlock"
	// sandboxNone runs them unconfined.
	sandboxNone = "none"
)

// podSecrets is where the kubelet mounts ServiceAccount tokens (the API's and projected ones) and
// other pod credentials (cloud workload identity tokens): never open to runs.
const podSecrets = "/var/run/secrets"

// sandboxFlagUsage documents --run-sandbox for the manager and the runner.
const sandboxFlagUsage = "Confine every run's processes (Terraform, providers, provisioners) with Landlock to an allow-list: " +
	"they read and execute the system, the binary, the CLI configuration and provider mirror, their module and its shared init; " +
	"they write only their own workspace (with its own HOME and TMPDIR); they open nothing of " + podSecrets + ", the kubeconfig, " +
	"the work directory's other contents, /proc or other runs, and cannot signal processes outside their run. " +
	"landlock: refuse to start without Landlock ABI 6 (Linux 6.12+, which scopes signals); auto: the best the kernel offers, " +
	"saying what is missing; none: unconfined."

// Usage of --run-sandbox-read and --run-sandbox-write, for the manager and the runner.
const (
	sandboxReadUsage  = "More paths, comma-separated, that every run may read and execute (with --run-sandbox), e.g. a provider mirror the CLI configuration does not name, or tools a module's provisioners run from outside the system's directories."
	sandboxWriteUsage = "Paths, comma-separated, that every run may write besides its own workspace (with --run-sandbox). Each is shared by every run of every class: name only what no run executes or trusts."
)

// sandboxSetup is what newSandbox needs besides the mode.
type sandboxSetup struct {
	// workDir is the process's work directory (runs, plugin cache, module cache, CLI
	// configuration): hidden from runs but for what each is granted.
	workDir string
	// binary is the tofu or terraform executable; env is the runs' base environment (its
	// TF_CLI_CONFIG_FILE, SSL_CERT_FILE and SSL_CERT_DIR are granted read).
	binary string
	env    map[string]string
	// hide, read and write are the --run-sandbox-hide, -read and -write paths (and a runner's token).
	hide, read, write []string
}

// newSandbox returns the sandbox of runs for mode (see sandboxFlagUsage): hidden are podSecrets,
// the kubeconfig files in use and the files they name, the work directory and setup.hide; every
// run may read the binary, the CLI configuration with the mirrors it names, the CA files and
// setup.read, and write setup.write. It returns nil, nil for "none", or for "auto" without
// Landlock (logged through logf), and an error for "landlock" without Landlock ABI 6, for an
// unknown mode, or when a path cannot be resolved. Every outcome is recorded by the
// conductor_tf_run_sandbox_info metric.
func newSandbox(mode string, setup sandboxSetup, logf func(format string, args ...any)) (*sandbox.Sandbox, error) {
	switch mode {
	case sandboxNone:
		logf("runs are not confined (--run-sandbox=none): a run can read whatever this process can")
		metrics.SetRunSandbox(sandboxNone, sandbox.ABI(), false, false)
		return nil, nil
	case sandboxAuto, sandboxLandlock:
	default:
		return nil, fmt.Errorf("--run-sandbox: %q is not one of landlock, auto, none", mode)
	}
	abi := sandbox.ABI()
	if mode == sandboxLandlock && abi >= 1 && !sandbox.SignalsScoped() {
		return nil, fmt.Errorf("--run-sandbox=landlock: the kernel's Landlock ABI is %d; 6 or later (Linux 6.12) is needed to keep runs "+
			"from signalling other runs and this process. Use a newer kernel, or --run-sandbox=auto to run with this one", abi)
	}
	// The work directory must exist to be hidden (paths that do not exist are left out).
	if err := os.MkdirAll(setup.workDir, 0o700); err != nil {
		return nil, err
	}
	hide := append([]string{podSecrets, setup.workDir}, kubeconfigFiles()...)
	hide = append(hide, setup.hide...)
	if err := checkReadPaths(setup.read, hide, setup.workDir); err != nil {
		return nil, err
	}
	trusted := []string{setup.binary}
	if f := setup.env["TF_CLI_CONFIG_FILE"]; f != "" {
		trusted = append(append(trusted, f), cliConfigPaths(f)...)
	}
	for _, k := range []string{"SSL_CERT_FILE", "SSL_CERT_DIR"} {
		trusted = append(trusted, filepath.SplitList(setup.env[k])...)
	}
	trusted = append(trusted, setup.read...)
	s, err := sandbox.New(sandbox.Access{Trusted: trusted, Write: setup.write}, hide)
	if errors.Is(err, sandbox.ErrUnavailable) && mode == sandboxAuto {
		logf("runs are not confined: %v", err)
		metrics.SetRunSandbox(sandboxNone, 0, false, false)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--run-sandbox=%s: %w", mode, err)
	}
	metrics.SetRunSandbox(sandboxLandlock, abi, sandbox.SignalsScoped(), sandbox.SocketsMediated())
	if !sandbox.SignalsScoped() {
		logf("WARNING: Landlock ABI %d cannot scope signals (6, Linux 6.12, can): a run can signal other runs and this process. "+
			"Give tenants that must not reach each other runner pools of their own, or use a newer kernel", abi)
	}
	base := s.Base()
	writes := append([]string{"its own workspace"}, base.Write...)
	logf("runs are confined with Landlock ABI %d (signals scoped: %t; Unix socket connects mediated: %t); every run reads the system and %s, writes %s; hidden from them: %s",
		abi, sandbox.SignalsScoped(), sandbox.SocketsMediated(), strings.Join(base.Trusted, ", "), strings.Join(writes, ", "), strings.Join(s.Hidden(), ", "))
	return s, nil
}

// kubeconfigFiles is every kubeconfig file this process may load (--kubeconfig, $KUBECONFIG,
// ~/.kube/config: controller-runtime's order) and the credential files they name (client
// certificates and keys, token files), as absolute paths. Files that cannot be parsed are listed
// themselves only.
func kubeconfigFiles() []string {
	var files []string
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		files = append(files, f.Value.String())
	}
	files = append(files, filepath.SplitList(os.Getenv(clientcmd.RecommendedConfigPathEnvVar))...)
	files = append(files, clientcmd.RecommendedHomeFile)
	out := append([]string(nil), files...)
	for _, f := range files {
		cfg, err := clientcmd.LoadFromFile(f)
		if err != nil {
			continue
		}
		for _, a := range cfg.AuthInfos {
			for _, p := range []string{a.ClientCertificate, a.ClientKey, a.TokenFile} {
				if p == "" {
					continue
				}
				if !filepath.IsAbs(p) {
					p = filepath.Join(filepath.Dir(f), p)
				}
				out = append(out, p)
			}
		}
	}
	return out
}

// checkReadPaths refuses a --run-sandbox-read path that, symlinks resolved, holds a hidden path
// (the token, the kubeconfig, the work directory: a read grant is trusted as named, so it would
// open them) or lies inside the work directory (other runs' workspaces). Paths that do not exist
// are left to the sandbox, which skips them. It returns an error naming the path.
func checkReadPaths(read, hide []string, workDir string) error {
	resolve := func(p string) (string, bool) {
		r, err := filepath.EvalSymlinks(p)
		return r, err == nil
	}
	within := func(p, dir string) bool {
		rel, err := filepath.Rel(dir, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	work, _ := resolve(workDir)
	for _, p := range read {
		r, ok := resolve(p)
		if !ok {
			continue
		}
		if work != "" && within(r, work) {
			return fmt.Errorf("--run-sandbox-read %s lies inside the work directory %s: runs may not read other runs' workspaces", p, workDir)
		}
		for _, h := range hide {
			if hr, ok := resolve(h); ok && within(hr, r) {
				return fmt.Errorf("--run-sandbox-read %s holds %s, which runs may not read", p, h)
			}
		}
	}
	return nil
}
