package tfrunner

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/warm"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// File names inside a workspace directory.
const (
	rootFile = "main.tf"
	varsFile = "conductor.tfvars.json"
	// ephemeralVarsFile holds Spec.EphemeralVariables while one command runs.
	ephemeralVarsFile = "conductor.ephemeral.tfvars.json"
	planFile          = "conductor.tfplan"
	stampFile         = ".conductor-init"
	// kubeconfigFile holds the Kubernetes credentials a run was granted (Spec.Kubeconfig); it
	// exists only while an operation runs.
	kubeconfigFile = "conductor.kubeconfig"
)

// DefaultGracePeriod is how long a cancelled run may take to stop after SIGINT before it is killed:
// long enough for Terraform to finish writing state and release its lock.
const DefaultGracePeriod = 2 * time.Minute

// Spec is the desired configuration of a workspace's runs, in plain Go values.
type Spec struct {
	// Module is the class's module, pinned.
	Module Module
	// Backend stores the state (see package statebackend).
	Backend Backend
	// Variables are the rendered, non-sensitive input variables; values must encode to JSON.
	Variables map[string]any
	// SensitiveVariables are input variables read from Secrets; they are declared sensitive.
	SensitiveVariables map[string]string
	// EphemeralVariables are input variables the module declares `ephemeral = true` (the
	// controller's generated passwords): declared ephemeral and sensitive in the root module and
	// given to each command that evaluates the configuration in a variables file of their own that
	// exists only while that command runs (writeEphemeralVars), so that no plan file or state holds
	// them (a saved plan's apply is given them again, as Terraform requires). Not in the
	// environment: terraform-exec refuses TF_VAR_* there, and a command line is readable by every
	// process. The module must declare each one ephemeral (CheckInputs).
	EphemeralVariables map[string]string
	// Env are extra environment variables of every command (provider credentials, the state
	// server's per-run TF_HTTP_* settings).
	Env map[string]string
	// Kubeconfig, when set, is the kubeconfig the run was granted (a ServiceAccount token the
	// controller requested for it): written into the workspace with mode 0600 for the operation
	// only and named by KUBECONFIG and KUBE_CONFIG_PATH; deleted when the operation ends. Without
	// it a run has no Kubernetes credentials unless the pool's environment gives some.
	Kubeconfig []byte
	// SourceCredentials, when set, are what fetching the module needs (registry tokens, git
	// credentials): init only ever sees them (see SourceCredentials).
	SourceCredentials *SourceCredentials
	// Identity, when set, is the cloud workload identity the run was granted: its token and
	// what the cloud's SDKs need to exchange it, written into the workspace for the operation
	// only (see Identity).
	Identity *Identity
	// Tenant is who the run is for (the claim's namespace; "" for static resources): waiting runs
	// are served across tenants in turn. Class is the InfraClass the resource was provisioned from
	// ("" for static resources): warm providers serve runs of one class only. Neither is part of
	// the workspace.
	Tenant, Class string
	// RunnerPool names the InfraRunnerPool whose runners execute the run; "" is the manager's
	// in-process pool. RunID is the run's id (status.lastRun.id). Neither is part of the workspace.
	RunnerPool, RunID string
	// ColdProviders starts every provider with the run even where the pool keeps warm ones (the
	// class's warmProviders: Disabled). Not part of the workspace.
	ColdProviders bool
}

// Workspace is the working directory of one resource. It is not safe for concurrent use: the Pool
// runs one operation per workspace at a time.
type Workspace struct {
	dir     string
	bin     Binary
	baseEnv map[string]string
	grace   time.Duration
	spec    Spec
	schema  *ModuleSchema
	// initializer is set on a shared init's directory (and the class check's): its commands may
	// write the plugin cache. shared is the shared init a run's workspace is linked to (read only
	// to its commands). connect are the warm providers' socket directories the next commands may
	// reach (set by the Pool around an apply that reattaches).
	initializer bool
	shared      *sharedInit
	connect     []string
	// files is the directory's layout: what Prepare writes and each command gets (layout.go).
	files layout
}

// NewWorkspace opens (creating it with mode 0700 if needed) the working directory dir for runs with
// bin. env is the complete environment of every command (os.Environ is not inherited): it should
// hold PATH, HOME and TF_CLI_CONFIG_FILE / TF_PLUGIN_CACHE_DIR as needed. grace is how long a
// cancelled command gets after SIGINT (DefaultGracePeriod when zero).
func NewWorkspace(dir string, bin Binary, env map[string]string, grace time.Duration) (*Workspace, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating workspace %s: %w", dir, err)
	}
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	return &Workspace{dir: dir, bin: bin, baseEnv: maps.Clone(env), grace: grace, files: layout{dir: dir, tmp: tempDirFor(dir)}}, nil
}

// Dir is the workspace's directory.
func (w *Workspace) Dir() string { return w.dir }

// Binary is the executable the workspace runs.
func (w *Workspace) Binary() Binary { return w.bin }

// Prepare writes the root module and the variables file for spec and reports whether Init must run
// before the next plan: the first time, and whenever the module address, backend or binary changed.
// It first removes the links and special files an earlier run may have planted (dropPlanted).
func (w *Workspace) Prepare(spec Spec) (needsInit bool, err error) {
	w.spec = spec
	if _, err := w.files.dropPlanted(); err != nil {
		return false, fmt.Errorf("clearing workspace %s: %w", w.dir, err)
	}
	want, err := initKey(w.bin, w.spec)
	if err != nil {
		return false, err
	}
	have, _ := wsfs.ReadIn(w.dir, stampFile)
	needsInit = string(have) != want
	if needsInit {
		w.schema = nil
	} else if w.schema == nil {
		if w.schema, err = w.loadSchema(); err != nil {
			// The module directory went away or changed underneath: init again.
			needsInit = true
		}
	}
	if err := w.files.writeRoot(w.spec, w.schema); err != nil {
		return false, err
	}
	if err := w.files.writeCredentials(w.spec); err != nil {
		return false, err
	}
	return needsInit, w.files.writeVars(w.spec)
}

// varFiles returns the -var-file options of one command that evaluates the configuration, as
// the command's option type O (terraform-exec's VarFileOption is an option of plan, apply,
// destroy and import alike): the variables file when withVars (not for a saved plan's apply,
// whose values are the plan's), and the file of the ephemeral variables written for this command
// (writeEphemeralVars). done deletes the latter and must be called when the command ends, also
// after an error.
func varFiles[O any](w *Workspace, withVars bool) (opts []O, done func(), err error) {
	if withVars {
		opts = append(opts, any(tfexec.VarFile(varsFile)).(O))
	}
	eph, done, err := w.files.writeEphemeralVars(w.spec)
	if eph != nil {
		opts = append(opts, any(eph).(O))
	}
	return opts, done, err
}

func (w *Workspace) tf() (*tfexec.Terraform, error) { return w.tfWith(nil) }

// fetchTF is tf for a command that fetches modules (init, get): with the spec's
// SourceCredentials, whose files it writes into the command's fresh TMPDIR; done deletes them.
func (w *Workspace) fetchTF() (tf *tfexec.Terraform, done func(), err error) {
	extra, err := w.spec.SourceCredentials.env(w.files.runTemp())
	if err != nil {
		return nil, nil, err
	}
	if extra == nil {
		extra = map[string]string{}
	}
	// git asks no one for a password: a repository that wants one fails at once, its
	// message in the class's or resource's condition.
	extra["GIT_TERMINAL_PROMPT"] = "0"
	if tf, err = w.tfWith(extra); err != nil {
		return nil, nil, err
	}
	if done, err = w.spec.SourceCredentials.write(w.files.runTemp()); err != nil {
		return nil, nil, err
	}
	return tf, done, nil
}

// tfWith is the Terraform of the workspace's next command, confined by the binary's sandbox, with
// runEnv and extra; it empties HOME and TMPDIR first (freshRunDirs).
func (w *Workspace) tfWith(extra map[string]string) (*tfexec.Terraform, error) {
	if err := w.files.freshRunDirs(); err != nil {
		return nil, err
	}
	env := w.runEnv()
	maps.Copy(env, extra)
	path, env := w.bin.Sandbox.Command(w.bin.Path, env, w.access(w.connect...))
	tf, err := tfexec.NewTerraform(w.dir, path)
	if err != nil {
		return nil, err
	}
	if err := tf.SetEnv(env); err != nil {
		return nil, err
	}
	if err := tf.SetWaitDelay(w.grace); err != nil {
		return nil, err
	}
	return tf, nil
}

// runEnv is the whole environment of the run's commands: the pool's, the run's own (provider
// credentials, the state server's), the kubeconfig granted, EnvWorkspace, and HOME and TMPDIR of
// the workspace's own (runDir), whatever the others say.
func (w *Workspace) runEnv() map[string]string {
	env := maps.Clone(w.baseEnv)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, w.spec.Env)
	env["HOME"], env["TMPDIR"] = w.files.runHome(), w.files.runTemp()
	if len(w.spec.Kubeconfig) > 0 {
		path := filepath.Join(w.dir, kubeconfigFile)
		env["KUBECONFIG"], env["KUBE_CONFIG_PATH"] = path, path
	}
	w.spec.Identity.setEnv(env, w.dir)
	env[procs.EnvWorkspace] = w.dir
	return env
}

// warmOwner is whose runs a warm provider process of this workspace's run may serve.
func (w *Workspace) warmOwner() warm.Owner {
	return warm.Owner{Tenant: w.spec.Tenant, Class: w.spec.Class, Source: w.spec.Module.Source, Version: w.spec.Module.Version}
}
