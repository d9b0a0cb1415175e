package resource

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

func TestClassifyRun(t *testing.T) {
	at := time.Unix(1700000000, 0)
	lock := &tfrunner.LockError{ID: "l1", Who: "someone@host", Op: "apply"}
	for _, tc := range []struct {
		name    string
		op      string
		err     error
		kind    outcomeKind
		wantOp  string
		reason  string
		message string
		retried bool
	}{
		{"success", "apply", nil, outcomeApplied, "apply", v1alpha1.ReasonApplied, "", false},
		{"shutdown", "apply", fmt.Errorf("apply: %w", context.Canceled), outcomeCancelled, "apply", v1alpha1.ReasonApplyFailed,
			"run cancelled: the controller is shutting down", false},
		{"held for approval", "plan", &approvalNeeded{planID: "p1", reason: WaitManual}, outcomeHeld, "plan", v1alpha1.ReasonWaitingForApproval, "", false},
		{"held for an interrupted create", "apply", &approvalNeeded{planID: "p1", reason: WaitInterruptedCreate, addresses: []string{"a.b"}},
			outcomeHeld, "plan", v1alpha1.ReasonInterruptedCreate, "", false},
		{"held, an imported object replaced", "plan", &approvalNeeded{planID: "p1", reason: WaitImportedReplaced}, outcomeHeld, "plan",
			v1alpha1.ReasonReplaceNeedsApproval, "", false},
		{"held, the approval discarded", "plan", &approvalNeeded{planID: "p2", reason: WaitDestructive, discarded: "p1"}, outcomeHeld, "plan",
			v1alpha1.ReasonPlanDiscarded, "", false},
		{"variables that do not fit", "apply", &tfrunner.InputError{Problems: "x: no such input"}, outcomeInvalid, "apply",
			v1alpha1.ReasonInvalidVariables, "x: no such input", false},
		{"a service account that is missing", "apply", &provision.InputError{Reason: v1alpha1.ReasonServiceAccountNotFound, Message: "no sa"}, outcomeInvalid, "apply",
			v1alpha1.ReasonServiceAccountNotFound, "no sa", false},
		{"locked", "apply", lock, outcomeLocked, "apply", v1alpha1.ReasonStateLocked, "", true},
		{"init failed", "apply", &tfrunner.RunError{Op: "init", Message: "no module"}, outcomeFailed, "init", v1alpha1.ReasonInitFailed, "no module", true},
		{"plan failed", "plan", &tfrunner.RunError{Op: "plan", Message: "bad"}, outcomeFailed, "plan", v1alpha1.ReasonPlanFailed, "bad", true},
		{"import failed", "plan", &tfrunner.RunError{Op: "import", Message: "gone"}, outcomeFailed, "import", v1alpha1.ReasonImportFailed, "gone", true},
		{"anything else", "apply", errors.New("boom"), outcomeFailed, "apply", v1alpha1.ReasonApplyFailed, "boom", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := classifyRun(tc.op, tc.err, at)
			msg := tc.message
			if msg == "" && tc.err != nil {
				msg = tc.err.Error()
			}
			if o.kind != tc.kind || o.op != tc.wantOp || o.reason != tc.reason || o.message != msg || o.retried() != tc.retried || !o.at.Equal(at) {
				t.Fatalf("classifyRun = %+v (retried %v), want kind %d op %s reason %s message %q retried %v",
					o, o.retried(), tc.kind, tc.wantOp, tc.reason, msg, tc.retried)
			}
			if tc.kind == outcomeLocked && o.lock != lock {
				t.Fatalf("lock %v", o.lock)
			}
		})
	}
}

func TestRecordOutcome(t *testing.T) {
	at := time.Unix(1700000000, 0)
	started := metav1.NewTime(at.Add(-time.Minute))
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied}
	for _, tc := range []struct {
		name      string
		applied   bool // an earlier generation was applied
		wasReady  bool
		lastRun   bool // the run was recorded before it started (newRun)
		o         runOutcome
		phase     v1alpha1.ResourcePhase
		result    v1alpha1.RunResult
		synced    metav1.ConditionStatus
		readyWant metav1.ConditionStatus
		readyWhy  string
	}{
		{name: "applied", lastRun: true, o: runOutcome{kind: outcomeApplied, reason: v1alpha1.ReasonApplied, message: "plan: 1 to add"},
			phase: v1alpha1.ResourceBound, result: v1alpha1.RunSucceeded, synced: metav1.ConditionTrue, readyWant: metav1.ConditionTrue, readyWhy: v1alpha1.ReasonApplied},
		{name: "a first provisioning fails", lastRun: true, o: runOutcome{kind: outcomeFailed, op: "apply", reason: v1alpha1.ReasonApplyFailed, message: "boom"},
			phase: v1alpha1.ResourceFailed, result: v1alpha1.RunFailed, synced: metav1.ConditionFalse, readyWant: metav1.ConditionFalse, readyWhy: v1alpha1.ReasonApplyFailed},
		{name: "a first provisioning waits for a person", lastRun: true, o: runOutcome{kind: outcomeHeld, op: "plan", reason: v1alpha1.ReasonWaitingForApproval, message: "waits"},
			phase: v1alpha1.ResourcePending, result: v1alpha1.RunWaitingForApproval, synced: metav1.ConditionFalse, readyWant: metav1.ConditionFalse, readyWhy: v1alpha1.ReasonWaitingForApproval},
		{name: "invalid inputs before any apply", o: runOutcome{kind: outcomeInvalid, op: "apply", reason: v1alpha1.ReasonInvalidVariables, message: "x"},
			phase: v1alpha1.ResourceFailed, result: v1alpha1.RunInvalid, synced: metav1.ConditionFalse, readyWant: metav1.ConditionFalse, readyWhy: v1alpha1.ReasonInvalidVariables},
		{name: "an applied resource keeps its phase and Ready", applied: true, wasReady: true, lastRun: true,
			o:     runOutcome{kind: outcomeLocked, op: "apply", reason: v1alpha1.ReasonStateLocked, message: "locked"},
			phase: v1alpha1.ResourceBound, result: v1alpha1.RunFailed, synced: metav1.ConditionFalse, readyWant: metav1.ConditionTrue, readyWhy: v1alpha1.ReasonApplied},
		{name: "an applied resource that was not Ready says why", applied: true, lastRun: true,
			o:     runOutcome{kind: outcomeFailed, op: "plan", reason: v1alpha1.ReasonPlanFailed, message: "bad"},
			phase: v1alpha1.ResourceBound, result: v1alpha1.RunFailed, synced: metav1.ConditionFalse, readyWant: metav1.ConditionFalse, readyWhy: v1alpha1.ReasonPlanFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &v1alpha1.InfraResourceStatus{Phase: v1alpha1.ResourceProvisioning}
			if tc.applied {
				st.ObservedGeneration, st.Phase = 1, v1alpha1.ResourceBound
			}
			if tc.wasReady {
				st.Conditions = []metav1.Condition{ready}
			}
			if tc.lastRun {
				st.LastRun = &v1alpha1.RunStatus{Operation: "apply", StartTime: &started, Result: v1alpha1.RunRunning, Generation: 2, ID: "r1"}
			}
			tc.o.at = at
			recordOutcome(st, 2, tc.o)
			st.Phase = phaseOf(phaseInputs{binding: v1alpha1.ResourceBound, runs: true, applied: st.ObservedGeneration > 0, last: st.LastRun, previous: st.Phase})
			last := st.LastRun
			if st.Phase != tc.phase || last == nil || last.Result != tc.result || last.Generation != 2 || !last.CompletionTime.Time.Equal(at) {
				t.Fatalf("phase %s, lastRun %+v; want %s, %s", st.Phase, last, tc.phase, tc.result)
			}
			if tc.lastRun && (last.ID != "r1" || !last.StartTime.Equal(&started)) {
				t.Fatalf("the run's own record was replaced: %+v", last)
			}
			if tc.o.op != "" && last.Operation != tc.o.op {
				t.Fatalf("operation %s, want %s", last.Operation, tc.o.op)
			}
			synced := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSynced)
			r := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
			if synced == nil || synced.Status != tc.synced || synced.Reason != tc.o.reason || synced.ObservedGeneration != 2 {
				t.Fatalf("Synced %+v", synced)
			}
			if r == nil || r.Status != tc.readyWant || r.Reason != tc.readyWhy {
				t.Fatalf("Ready %+v, want %s %s", r, tc.readyWant, tc.readyWhy)
			}
		})
	}
}

// TestPhaseOf: the phase follows from the binding, whether the resource was ever applied, its last
// run and its reclaim, whatever was written before (except a failed first provisioning retried).
func TestPhaseOf(t *testing.T) {
	run := func(result v1alpha1.RunResult) *v1alpha1.RunStatus { return &v1alpha1.RunStatus{Result: result} }
	const (
		available = v1alpha1.ResourceAvailable
		bound     = v1alpha1.ResourceBound
		released  = v1alpha1.ResourceReleased
	)
	for _, tc := range []struct {
		name string
		in   phaseInputs
		want v1alpha1.ResourcePhase
	}{
		{"reclaiming", phaseInputs{deleting: true, binding: bound, runs: true, applied: true, last: run(v1alpha1.RunRunning)}, v1alpha1.ResourceDeleting},
		{"reclaiming a resource never applied", phaseInputs{deleting: true, runs: true, previous: v1alpha1.ResourceFailed}, v1alpha1.ResourceDeleting},
		{"binding not observed keeps what was written", phaseInputs{runs: true, last: run(v1alpha1.RunFailed), previous: bound}, bound},
		{"released before any apply", phaseInputs{binding: released, runs: true, last: run(v1alpha1.RunFailed)}, released},
		{"released after an apply", phaseInputs{binding: released, runs: true, applied: true, last: run(v1alpha1.RunSucceeded)}, released},
		{"no runs: the binding alone", phaseInputs{binding: bound}, bound},
		{"no runs, no claim", phaseInputs{binding: available, previous: v1alpha1.ResourcePending}, available},
		{"applied and bound", phaseInputs{binding: bound, runs: true, applied: true, last: run(v1alpha1.RunSucceeded)}, bound},
		{"applied, its last run failed", phaseInputs{binding: bound, runs: true, applied: true, last: run(v1alpha1.RunFailed), previous: bound}, bound},
		{"applied, a run under way", phaseInputs{binding: available, runs: true, applied: true, last: run(v1alpha1.RunRunning)}, available},
		{"applied, a plan waits", phaseInputs{binding: bound, runs: true, applied: true, last: run(v1alpha1.RunWaitingForApproval)}, bound},
		{"no run yet", phaseInputs{binding: bound, runs: true}, v1alpha1.ResourcePending},
		{"first provisioning", phaseInputs{binding: bound, runs: true, last: run(v1alpha1.RunRunning), previous: v1alpha1.ResourcePending}, v1alpha1.ResourceProvisioning},
		{"failed first provisioning retried", phaseInputs{binding: bound, runs: true, last: run(v1alpha1.RunRunning), previous: v1alpha1.ResourceFailed}, v1alpha1.ResourceFailed},
		{"first plan waits for a person", phaseInputs{binding: bound, runs: true, last: run(v1alpha1.RunWaitingForApproval)}, v1alpha1.ResourcePending},
		{"first provisioning failed", phaseInputs{binding: available, runs: true, last: run(v1alpha1.RunFailed), previous: v1alpha1.ResourceProvisioning}, v1alpha1.ResourceFailed},
		{"invalid inputs", phaseInputs{binding: bound, runs: true, last: run(v1alpha1.RunInvalid)}, v1alpha1.ResourceFailed},
		{"discovered, waiting for a claim: Available without a run", phaseInputs{binding: available, runs: true, discovered: true}, available},
		{"discovered, its object no longer listed: Lost", phaseInputs{binding: available, runs: true, discovered: true, lost: true}, v1alpha1.ResourceLost},
		{"discovered and bound: its first run decides, as any", phaseInputs{binding: bound, runs: true, discovered: true, lost: true}, v1alpha1.ResourcePending},
		{"discovered, its import plan waits", phaseInputs{binding: bound, runs: true, discovered: true, last: run(v1alpha1.RunWaitingForApproval)}, v1alpha1.ResourcePending},
	} {
		if got := phaseOf(tc.in); got != tc.want {
			t.Errorf("%s: phaseOf(%+v) = %s, want %s", tc.name, tc.in, got, tc.want)
		}
	}
}
