package resource

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// Runs is the boundary between the resource controller and Terraform (runners.Router implements
// it for the in-process pool and runner pools alike): a run in, its outcome out. Where a run
// happens, its workspace, and a state it could not save (which the carrier hands to the state
// server's pending state as soon as the run returns) stay behind it. So do runs that outlive
// their manager: a carrier that resumes one here says its key on Resumed, and the reconcile of
// that key takes it over with Attach (adopt.go); a carrier whose runs die with the manager embeds
// NoAdoption.
type Runs interface {
	// Apply brings key's infrastructure to spec (one apply -json, or plan, opts' gate, apply).
	Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error)
	// Destroy destroys everything key's state holds.
	Destroy(ctx context.Context, key string, spec tfrunner.Spec) error
	// DriftCheck plans key's infrastructure read-only.
	DriftCheck(ctx context.Context, key string, spec tfrunner.Spec) (*tfjson.StreamResult, error)
	// Attach carries on, as its caller, the apply runID of key that another manager started and
	// that was resumed and adopted here: opts.Events gets its events from now on and its outcome
	// comes back as Apply's would. attached is false, and nothing is done, when no such run waits.
	Attach(ctx context.Context, key, runID string, opts tfrunner.ApplyOptions) (out *tfrunner.ApplyResult, attached bool, err error)
	// Resumed delivers the key of each run adopted here, for the reconcile that attaches to it;
	// nil when runs are never adopted. The channel is never closed.
	Resumed() <-chan string
}

// NoAdoption is the adoption half of Runs for a carrier whose runs end with their manager (as
// crossplane-runtime's NopClient is a client that does nothing): no run is ever attached, and
// Resumed delivers nothing. Embed it.
type NoAdoption struct{}

// Attach attaches to nothing: attached is false.
func (NoAdoption) Attach(context.Context, string, string, tfrunner.ApplyOptions) (*tfrunner.ApplyResult, bool, error) {
	return nil, false, nil
}

// Resumed is nil: a channel nothing is sent on.
func (NoAdoption) Resumed() <-chan string { return nil }

// RunIdentity names the runs of one controller deployment.
type RunIdentity struct {
	// Who is the holder Terraform records in the locks of this controller's runs (user@host, see
	// statebackend.Who). Every pod of the Deployment shares it, so the leader recognises locks
	// that runs of an earlier pod left behind. statebackend.Who() when empty.
	Who string
	// Controller names the pod (or process) that starts runs, recorded in each run for people.
	Controller string
}

func (id RunIdentity) who() string {
	if id.Who != "" {
		return id.Who
	}
	return statebackend.Who()
}

// newRun is the record of a run about to start (written before its first command: the crash
// window), with a fresh run ID, this deployment's lock holder and this pod's name.
func (id RunIdentity) newRun(res *v1alpha1.InfraResource, op string, now time.Time) *v1alpha1.RunStatus {
	start := metav1.NewTime(now)
	return &v1alpha1.RunStatus{
		Operation: op, QueuedTime: &start, StartTime: start.DeepCopy(), Result: v1alpha1.RunRunning, Generation: res.Generation,
		ID: string(uuid.NewUUID()), Who: id.who(), Controller: id.Controller,
	}
}

// runResult is the result label of conductor_tf_run_duration_seconds for a run that returned err.
func runResult(last *v1alpha1.RunStatus, err error) string {
	var le *tfrunner.LockError
	switch {
	case err == nil:
		return string(v1alpha1.RunSucceeded)
	case errors.Is(err, context.Canceled):
		return "Cancelled"
	case errors.As(err, &le):
		return v1alpha1.ReasonStateLocked
	case last != nil && last.Result != "" && last.Result != v1alpha1.RunRunning:
		return string(last.Result)
	}
	return string(v1alpha1.RunFailed)
}

// started records that run got its runner slot at now (the Started event): its StartTime, and
// its wait in line (conductor_tf_run_wait_seconds) from its QueuedTime.
func started(run *v1alpha1.RunStatus, now time.Time) {
	if run == nil {
		return
	}
	if run.QueuedTime != nil {
		metrics.ObserveRunWait(now.Sub(run.QueuedTime.Time))
	}
	t := metav1.NewTime(now)
	run.StartTime = &t
}

// needsRun decides whether the resource's infrastructure must be planned now: a new generation, no
// run yet, a failed or interrupted run, or a successful one older than the sync interval. A run
// refused as Invalid waits for a new generation.
func needsRun(res *v1alpha1.InfraResource, now time.Time, interval time.Duration) (bool, time.Duration) {
	last := res.Status.LastRun
	switch {
	case last == nil, last.Generation != res.Generation:
		return true, 0
	case last.Result == v1alpha1.RunInvalid:
		return false, 0
	case last.Result == v1alpha1.RunWaitingForApproval:
		return approved(res), 0
	case last.Result != v1alpha1.RunSucceeded:
		return true, 0
	case last.CompletionTime == nil:
		return true, 0
	}
	if age := now.Sub(last.CompletionTime.Time); age < interval {
		return false, interval - age
	}
	return true, 0
}

func summaryOf(p *tfjson.Plan) *v1alpha1.PlanSummary {
	return &v1alpha1.PlanSummary{Add: int32(p.Summary.Add), Change: int32(p.Summary.Change),
		Destroy: int32(p.Summary.Destroy), Import: int32(p.Summary.Import)}
}
