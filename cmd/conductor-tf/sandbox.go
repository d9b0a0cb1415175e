package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

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
const sandboxFlagUsage = "Confine every run's processes (Terraform, providers, provisioners) with Landlock so that they cannot open " +
	podSecrets + " (ServiceAccount tokens), the kubeconfig this process uses, a runner's run-protocol token or other runs' " +
	"working directories, nor read or signal this process: landlock (refuse to start without it: Linux 5.13+), " +
	"auto (landlock where the kernel has it), none."

// newSandbox returns the sandbox of runs for mode: hidden are podSecrets, the kubeconfig files in
// use and the files they name, runsDir (every run's working directory: each run gets its own back),
// and extra; open again are shared (directories under runsDir that runs use together). It returns
// nil, nil for "none", or for "auto" without Landlock (logged through logf), and an error for
// "landlock" without it or an unknown mode.
func newSandbox(mode, runsDir string, shared, extra []string, logf func(format string, args ...any)) (*sandbox.Sandbox, error) {
	switch mode {
	case sandboxNone:
		logf("runs are not confined (--run-sandbox=none): a run can read whatever this process can")
		return nil, nil
	case sandboxAuto, sandboxLandlock:
	default:
		return nil, fmt.Errorf("--run-sandbox: %q is not one of landlock, auto, none", mode)
	}
	hide := append([]string{podSecrets, runsDir}, kubeconfigFiles()...)
	hide = append(hide, extra...)
	// The runs directory must exist to be hidden (paths that do not exist are left out).
	for _, d := range append([]string{runsDir}, shared...) {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	s, err := sandbox.New(hide, shared)
	if errors.Is(err, sandbox.ErrUnavailable) && mode == sandboxAuto {
		logf("runs are not confined: %v", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--run-sandbox=%s: %w", mode, err)
	}
	logf("runs are confined with Landlock ABI %d; hidden from them: %s", sandbox.ABI(), strings.Join(s.Hidden(), ", "))
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
