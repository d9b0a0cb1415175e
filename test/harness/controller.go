package harness

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Client returns a controller-runtime client of the environment, as its admin, with the
// Kubernetes and conductor.io schemes.
func (e *Env) Client() (client.Client, error) { return NewClient(e.Config) }

// NewClient returns a controller-runtime client of cfg with the Kubernetes and conductor.io
// schemes.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// BuildController builds cmd/conductor-tf into dir and returns the binary's path.
func BuildController(dir string) (string, error) { return build(dir, "conductor-tf") }

// BuildPlugin builds the kubectl plugin cmd/kubectl-conductor into dir and returns its path.
func BuildPlugin(dir string) (string, error) { return build(dir, "kubectl-conductor") }

// build builds cmd/<name> into dir/<name>.
func build(dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "github.com/conductor-tf/conductor-tf/cmd/"+name)
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// Controller is a controller process (cmd/conductor-tf) in a process group of its own.
type Controller struct {
	Cmd *exec.Cmd
}

// StartController runs the controller binary against the environment's API server with the
// Terraform environment tfEnv (PATH, HOME, TF_CLI_CONFIG_FILE, …) and args, logging to logPath.
func (e *Env) StartController(bin, logPath string, tfEnv map[string]string, args ...string) (*Controller, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"KUBECONFIG=" + e.Kubeconfig}
	for k, v := range tfEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Controller{Cmd: cmd}, nil
}

// Kill sends SIGKILL to the controller's process group; its tofu children get SIGKILL from the
// kernel as it dies (terraform-exec sets Pdeathsig), as everything in a pod dies with it.
func (c *Controller) Kill() {
	_ = syscall.Kill(-c.Cmd.Process.Pid, syscall.SIGKILL)
	_, _ = c.Cmd.Process.Wait()
}

// Stop stops the controller as Kubernetes stops a pod: SIGTERM, then wait for it to exit.
func (c *Controller) Stop() {
	_ = c.Cmd.Process.Signal(syscall.SIGTERM)
	_, _ = c.Cmd.Process.Wait()
}

// Busy reports whether the controller has a child process (tofu or a provider) running now.
func (c *Controller) Busy() bool {
	pid := strconv.Itoa(c.Cmd.Process.Pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …"
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == pid {
			return true
		}
	}
	return false
}

// RSS returns the controller's resident set size and its peak (VmRSS, VmHWM), in bytes.
func (c *Controller) RSS() (rss, peak int64, err error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.Cmd.Process.Pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kib, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kib << 10
		case "VmHWM:":
			peak = kib << 10
		}
	}
	return rss, peak, nil
}
