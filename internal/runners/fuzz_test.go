package runners

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// FuzzRunnerResult: whatever a runner (or something posing as one) sends back as a Result, the
// manager's apply path (applyOutcome) turns it into an outcome or an error, never a panic, and a
// Result without an outcome into an unknown one (issue 33: a Result without Apply or Drift
// dereferenced nil; issue 46: an empty Apply{} or Drift{}, without the plan every outcome has,
// reached the reconciler, which dereferenced the missing plan). The drift path (driftOutcome)
// likewise.
func FuzzRunnerResult(f *testing.F) {
	seeds := []*runnerpb.Result{
		{},
		newResult(&tfrunner.ApplyResult{Applied: true, Plan: &tfjson.Plan{ID: "p"}, Outputs: map[string]tfjson.Output{"x": {Value: []byte(`1`)}}}, nil, nil),
		{Apply: &runnerpb.ApplyResult{}},
		{Drift: &runnerpb.StreamResult{}},
		newResult(nil, &tfjson.StreamResult{}, nil),
		newResult(nil, nil, &tfrunner.RunError{Op: "apply", Message: "boom"}),
		newResult(&tfrunner.ApplyResult{Plan: &tfjson.Plan{Changes: []tfjson.Change{{Address: "a.b", Actions: []string{"create"}}}}}, nil, nil),
	}
	for _, s := range seeds {
		data, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r runnerpb.Result
		if err := proto.Unmarshal(data, &r); err != nil {
			return
		}
		j := &job{spec: &runnerpb.RunSpec{Id: "run"}, result: &r}
		res, err := applyOutcome(j, errorFromProto(r.GetError(), nil))
		if res == nil {
			t.Fatalf("a nil ApplyResult from %v", &r)
		}
		if err == nil && (r.GetApply() == nil || res.Plan == nil) {
			t.Fatalf("a Result with no apply outcome (or one without its plan) and no error was taken as applied: %v", &r)
		}
		if r.GetApply() == nil && r.GetError() == nil && !errors.Is(err, tfrunner.ErrProcessLost) {
			t.Fatalf("a Result with neither outcome nor error: %v; want the run's outcome unknown (ErrProcessLost)", err)
		}
		drift, err := driftOutcome(j, errorFromProto(r.GetError(), nil))
		if err == nil && (drift == nil || drift.Plan == nil) {
			t.Fatalf("a Result with no drift outcome (or one without its plan) and no error was taken as checked: %v", &r)
		}
	})
}
