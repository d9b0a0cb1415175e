package tfrunner

// A workspace's Terraform commands: init, plan, apply, show, destroy, import, and the reads of
// outputs and addresses from state, each through terraform-exec.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
	hcjson "github.com/hashicorp/terraform-json"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// Init runs init (modules, backend, providers) and reads the module's declared inputs and outputs.
// It returns a *RunError with Terraform's message when init fails.
func (w *Workspace) Init(ctx context.Context) error {
	tf, done, err := w.fetchTF()
	if err != nil {
		return err
	}
	defer done()
	_ = os.Remove(filepath.Join(w.dir, stampFile))
	if err := tf.Init(ctx, tfexec.Upgrade(false), tfexec.Reconfigure(true)); err != nil {
		return classify("init", err)
	}
	if w.schema, err = w.loadSchema(); err != nil {
		return &RunError{Op: "init", Message: err.Error(), Err: err}
	}
	if err := w.files.writeRoot(w.spec, w.schema); err != nil {
		return err
	}
	key, err := initKey(w.bin, w.spec)
	if err != nil {
		return err
	}
	return wsfs.WriteAtomic(filepath.Join(w.dir, stampFile), []byte(key), 0o600)
}

// Schema is the module's declared inputs and outputs, known after Init.
func (w *Workspace) Schema() *ModuleSchema { return w.schema }

// PlanOptions modify a plan.
type PlanOptions struct {
	// Destroy plans the destruction of everything in state.
	Destroy bool
	// Log, when set, receives the plan's output as people read it.
	Log io.Writer
}

// Plan runs plan into a saved plan file and reads it back with show -json.
// It returns a *LockError when the state is locked by someone else, else a *RunError on failure.
func (w *Workspace) Plan(ctx context.Context, opts PlanOptions) (*tfjson.Plan, error) {
	tf, err := w.tf()
	if err != nil {
		return nil, err
	}
	planOpts, done, err := varFiles[tfexec.PlanOption](w, true)
	defer done()
	if err != nil {
		return nil, err
	}
	planOpts = append(planOpts, tfexec.Out(planFile))
	if opts.Destroy {
		planOpts = append(planOpts, tfexec.Destroy(true))
	}
	if opts.Log != nil {
		tf.SetStdout(opts.Log)
	}
	hasChanges, err := tf.Plan(ctx, planOpts...)
	if err != nil {
		return nil, classify("plan", err)
	}
	// show -json holds every value, sensitive ones included: never through the log's writer.
	if tf, err = w.tf(); err != nil {
		return nil, err
	}
	raw, err := tf.ShowPlanFile(ctx, planFile)
	if err != nil {
		return nil, classify("show", err)
	}
	p := tfjson.Summarize(raw)
	p.HasChanges = hasChanges
	p.Destroy = opts.Destroy
	return p, nil
}

// Apply applies a saved plan made by Plan in this workspace; log, when not nil, receives its
// output. It returns the addresses whose apply ended with the provider's answer
// (StreamResult.Ended), also when it fails, and a *LockError when the state is locked by someone
// else, else a *RunError.
func (w *Workspace) Apply(ctx context.Context, p *tfjson.Plan, log io.Writer, onCreate tfjson.CreateStartFunc) ([]string, error) {
	if p == nil {
		return nil, errors.New("apply: no plan")
	}
	// A saved plan holds no ephemeral variable's value: the apply is given them again (the other
	// variables' values are the plan's).
	applyOpts, done, err := varFiles[tfexec.ApplyOption](w, false)
	defer done()
	if err != nil {
		return nil, err
	}
	applyOpts = append(applyOpts, tfexec.DirOrPlan(planFile))
	res, err := w.streamApply(ctx, onCreate, applyOpts...)
	if res == nil {
		return nil, err
	}
	if log != nil {
		for _, l := range res.Log {
			fmt.Fprintln(log, l)
		}
	}
	return res.Ended, err
}

// ShowPlanText is Terraform's human-readable rendering of the saved plan (show -no-color <plan>),
// sensitive values redacted by Terraform. It returns a *RunError when show fails.
func (w *Workspace) ShowPlanText(ctx context.Context) (string, error) {
	tf, err := w.tf()
	if err != nil {
		return "", err
	}
	text, err := tf.ShowPlanFileRaw(ctx, planFile)
	if err != nil {
		return "", classify("show", err)
	}
	return text, nil
}

// Destroy destroys everything in state.
// It returns a *LockError when the state is locked by someone else, else a *RunError on failure.
func (w *Workspace) Destroy(ctx context.Context) error {
	tf, err := w.tf()
	if err != nil {
		return err
	}
	destroyOpts, done, err := varFiles[tfexec.DestroyOption](w, true)
	defer done()
	if err != nil {
		return err
	}
	return classify("destroy", tf.Destroy(ctx, destroyOpts...))
}

// Import imports the existing object id at address (inside the module: "module.main." is prefixed
// when missing). It returns a *RunError with Terraform's message when the import fails.
func (w *Workspace) Import(ctx context.Context, address, id string) error {
	tf, err := w.tf()
	if err != nil {
		return err
	}
	importOpts, done, err := varFiles[tfexec.ImportOption](w, true)
	defer done()
	if err != nil {
		return err
	}
	return classify("import", tf.Import(ctx, ModuleAddress(address), id, importOpts...))
}

// ModuleAddress prefixes a resource address inside the module with "module.main.".
func ModuleAddress(address string) string {
	prefix := "module." + ModuleName + "."
	if strings.HasPrefix(address, prefix) {
		return address
	}
	return prefix + address
}

// Outputs reads the root outputs from state.
func (w *Workspace) Outputs(ctx context.Context) (map[string]tfjson.Output, error) {
	tf, err := w.tf()
	if err != nil {
		return nil, err
	}
	raw, err := tf.Output(ctx)
	if err != nil {
		return nil, classify("output", err)
	}
	out := make(map[string]tfjson.Output, len(raw))
	for k, v := range raw {
		out[k] = tfjson.Output{Value: v.Value, Sensitive: v.Sensitive}
	}
	return out, nil
}

// StateAddresses lists the addresses of the managed resources in state, sorted.
func (w *Workspace) StateAddresses(ctx context.Context) ([]string, error) {
	tf, err := w.tf()
	if err != nil {
		return nil, err
	}
	st, err := tf.Show(ctx)
	if err != nil {
		return nil, classify("show", err)
	}
	var addrs []string
	if st != nil && st.Values != nil {
		var walk func(m *hcjson.StateModule)
		walk = func(m *hcjson.StateModule) {
			for _, r := range m.Resources {
				if r.Mode == hcjson.ManagedResourceMode {
					addrs = append(addrs, r.Address)
				}
			}
			for _, c := range m.ChildModules {
				walk(c)
			}
		}
		walk(st.Values.RootModule)
	}
	sort.Strings(addrs)
	return addrs, nil
}
