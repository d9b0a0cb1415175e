package tfrunner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// ApplyJSON brings the infrastructure to the workspace's spec in one process:
// `apply -auto-approve -input=false -json -var-file=…` (terraform-exec ApplyJSON). Its stream gives
// the planned changes, the plan's and the apply's change summaries and the non-sensitive outputs
// (sensitive outputs come without a value: read them with Outputs). The stream is read as it is
// written: onCreate (may be nil) is called for each create that starts, before the next event is
// read; when it fails the run is interrupted (SIGINT: Terraform finishes what it started and saves
// its state) and its error returned. The result is returned even when the run fails, with what the
// stream said so far. Errors: *LockError when the state is locked by someone else, else *RunError
// with Terraform's diagnostics, or a context error.
//
// extra are further terraform-exec options (Reattach, for warm providers).
func (w *Workspace) ApplyJSON(ctx context.Context, onCreate tfjson.CreateStartFunc, extra ...tfexec.ApplyOption) (*tfjson.StreamResult, error) {
	opts, done, err := varFiles[tfexec.ApplyOption](w, true)
	defer done()
	if err != nil {
		return nil, err
	}
	return w.streamApply(ctx, onCreate, append(opts, extra...)...)
}

// streamApply runs apply -json with opts, reading its stream while it runs (see ApplyJSON).
func (w *Workspace) streamApply(ctx context.Context, onCreate tfjson.CreateStartFunc, opts ...tfexec.ApplyOption) (*tfjson.StreamResult, error) {
	tf, err := w.tf()
	if err != nil {
		return nil, err
	}
	// Which types live only in state, from the modules init installed; unreadable: none, so that
	// every create is recorded as it starts.
	stateOnly, _ := readStateOnlyTypes(w.dir)
	runCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	pr, pw := io.Pipe()
	type read struct {
		res *tfjson.StreamResult
		err error
	}
	done := make(chan read, 1)
	go func() {
		res, err := tfjson.ReadApply(pr, func(addr string) error {
			if onCreate == nil {
				return nil
			}
			if err := onCreate(addr); err != nil {
				interrupt()
				return err
			}
			return nil
		}, stateOnly.has)
		_, _ = io.Copy(io.Discard, pr) // never block the writer
		done <- read{res, err}
	}()
	runErr := tf.ApplyJSON(runCtx, pw, opts...)
	_ = pw.Close()
	out := <-done
	if out.res != nil && runCtx.Err() == nil {
		// Not interrupted: a create that errored was refused by its provider, not cut off.
		out.res.EndErrored()
	}
	if out.err != nil && ctx.Err() == nil {
		// The process's own outcome is kept beside it: Killed must still see a killed process.
		what := "recording a create that started"
		if errors.Is(out.err, tfjson.ErrLineTooLong) {
			what = "reading the apply's output"
		}
		return out.res, errors.Join(fmt.Errorf("%s: %w", what, out.err), classify("apply", streamError(runErr, out.res)))
	}
	if runErr != nil {
		return out.res, classify("apply", streamError(runErr, out.res))
	}
	return out.res, nil
}

// DriftCheck plans without taking the lock and without saving a plan:
// `plan -json -detailed-exitcode -lock=false -input=false` (terraform-exec PlanJSON). The result's
// Plan says what applying would change; Drift lists the objects changed outside Terraform. It is
// read-only: nothing is written to state. Errors are as for ApplyJSON, with operation "plan".
func (w *Workspace) DriftCheck(ctx context.Context) (*tfjson.StreamResult, error) {
	tf, err := w.tf()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	planOpts, done, err := varFiles[tfexec.PlanOption](w, true)
	defer done()
	if err != nil {
		return nil, err
	}
	planOpts = append(planOpts, tfexec.Lock(false))
	hasChanges, runErr := tf.PlanJSON(ctx, &buf, planOpts...)
	res, _ := tfjson.ReadStream(&buf)
	if runErr != nil {
		return res, classify("plan", streamError(runErr, res))
	}
	res.Plan.HasChanges = hasChanges
	return res, nil
}

// streamError adds the stream's error diagnostics to the error terraform-exec returned (with -json
// they are on stdout, which terraform-exec does not include), in the "Error: summary" form that
// classify and TrimMessage read.
func streamError(err error, res *tfjson.StreamResult) error {
	if res == nil || len(res.Errors) == 0 {
		return err
	}
	var b bytes.Buffer
	for _, e := range res.Errors {
		fmt.Fprintf(&b, "Error: %s\n\n", e)
	}
	return fmt.Errorf("%s\n%w", b.String(), err)
}
