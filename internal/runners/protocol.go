// Package runners runs Terraform outside the manager's pod: runner processes (`conductor-tf
// runner`, one Deployment per InfraRunnerPool) pull runs from the manager over a gRPC stream, run
// them with their own tfrunner.Pool, and stream the run's hooks, heartbeats and outcome back. The
// manager side (Dispatcher) implements the controller's Runs interface, so the reconciler does not
// know where a run executes.
//
// The wire format is gRPC (google.golang.org/grpc) with a JSON codec: one bidirectional stream,
// Runs/Run, per run. The runner opens it and says Hello; the manager answers with the run's Spec
// once one is queued for the runner's pool; then the runner sends hook requests (Schema, Plan,
// CreateStart), Heartbeats and finally its Result, and the manager answers each hook with an
// Answer, asks for a plan's rendering (Render) or cancels the run (Cancel).
package runners

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// ServiceName is the gRPC service of the run protocol; RunMethod its one method.
const (
	ServiceName = "conductor.runner.v1.Runs"
	RunMethod   = "/" + ServiceName + "/Run"
	// Audience is the audience of the projected ServiceAccount tokens runners authenticate with;
	// the manager's TokenReview accepts no other.
	Audience = "conductor-tf-runner"
)

// Operations a RunSpec asks for.
const (
	OpApply      = "apply"
	OpDestroy    = "destroy"
	OpDriftCheck = "drift-check"
)

// RunnerMessage is what a runner sends on a run's stream; exactly one field is set.
type RunnerMessage struct {
	// Hello is the stream's first message: who asks for work.
	Hello *Hello `json:"hello,omitempty"`
	// Heartbeat says the runner and its run are alive (every heartbeat interval).
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
	// Schema asks the manager's Check hook about the module's inputs and outputs; answered.
	Schema *tfrunner.ModuleSchema `json:"schema,omitempty"`
	// Plan asks the manager's BeforeApply hook about a saved plan with changes; answered.
	Plan *tfrunner.Plan `json:"plan,omitempty"`
	// Rendered answers the manager's Render: the plan as `show -no-color` prints it.
	Rendered *Rendered `json:"rendered,omitempty"`
	// CreateStart asks the manager's OnCreateStart hook before a create goes on; answered.
	CreateStart *CreateStart `json:"createStart,omitempty"`
	// Result is the run's outcome, the stream's last message.
	Result *Result `json:"result,omitempty"`
}

// ManagerMessage is what the manager sends on a run's stream; exactly one field is set.
type ManagerMessage struct {
	// Run is the run the runner is given.
	Run *RunSpec `json:"run,omitempty"`
	// Answer answers the runner's last hook request.
	Answer *Answer `json:"answer,omitempty"`
	// Render asks for the saved plan's human-readable rendering (BeforeApply's render).
	Render bool `json:"render,omitempty"`
	// Cancel stops the run: Terraform gets SIGINT, and the runner still sends its Result.
	Cancel bool `json:"cancel,omitempty"`
}

// Hello names the runner and the pool it serves.
type Hello struct {
	// Runner is the runner's name (its pod), recorded with the runs it is given.
	Runner string `json:"runner"`
	// Pool is the InfraRunnerPool the runner belongs to.
	Pool string `json:"pool"`
}

// Heartbeat carries nothing: its arrival is the news.
type Heartbeat struct{}

// Rendered is a plan's rendering, or why it could not be made.
type Rendered struct {
	Text  string `json:"text"`
	Error string `json:"error,omitempty"`
}

// CreateStart names the object whose create starts (its module address).
type CreateStart struct {
	Address string `json:"address"`
}

// Answer is a hook's verdict: empty Error lets the run go on; otherwise the run stops there.
type Answer struct {
	Error string `json:"error,omitempty"`
}

// RunSpec is one run: the operation, the resource's key and everything the run needs. It holds the
// run's secrets (sensitive variables, the state server's per-run credentials, a granted
// kubeconfig); the runner deletes them when the run ends.
type RunSpec struct {
	// ID is the run's id, as the resource's status.lastRun records it.
	ID string `json:"id"`
	// Op is OpApply, OpDestroy or OpDriftCheck.
	Op string `json:"op"`
	// Key names the resource (its workspace).
	Key string `json:"key"`
	// StateURL, when set, is the manager's state server for this run (https://pod-ip:port); else
	// the runner's --state-url.
	StateURL string   `json:"stateURL,omitempty"`
	Spec     WireSpec `json:"spec"`
	// SavedPlan and Imports are ApplyOptions'; Check, BeforeApply and OnCreateStart are asked
	// over the stream when the corresponding flags are set.
	SavedPlan      bool                    `json:"savedPlan,omitempty"`
	Imports        []tfrunner.ImportTarget `json:"imports,omitempty"`
	AskCheck       bool                    `json:"askCheck,omitempty"`
	AskBeforeApply bool                    `json:"askBeforeApply,omitempty"`
	AskCreateStart bool                    `json:"askCreateStart,omitempty"`
}

// WireSpec is tfrunner.Spec as JSON: the backend's attributes are cty values (strings and bools).
type WireSpec struct {
	Module             tfrunner.Module                    `json:"module"`
	BackendType        string                             `json:"backendType"`
	BackendConfig      map[string]ctyjson.SimpleJSONValue `json:"backendConfig,omitempty"`
	Variables          map[string]any                     `json:"variables,omitempty"`
	SensitiveVariables map[string]string                  `json:"sensitiveVariables,omitempty"`
	Env                map[string]string                  `json:"env,omitempty"`
	Kubeconfig         []byte                             `json:"kubeconfig,omitempty"`
	Tenant             string                             `json:"tenant,omitempty"`
}

// toWire converts a Spec for the stream.
func toWire(s tfrunner.Spec) WireSpec {
	w := WireSpec{
		Module: s.Module, BackendType: s.Backend.Type, Variables: s.Variables,
		SensitiveVariables: s.SensitiveVariables, Env: s.Env, Kubeconfig: s.Kubeconfig, Tenant: s.Tenant,
	}
	if len(s.Backend.Config) > 0 {
		w.BackendConfig = map[string]ctyjson.SimpleJSONValue{}
		for k, v := range s.Backend.Config {
			w.BackendConfig[k] = ctyjson.SimpleJSONValue{Value: v}
		}
	}
	return w
}

// spec converts a received WireSpec back.
func (w WireSpec) spec() tfrunner.Spec {
	s := tfrunner.Spec{
		Module: w.Module, Backend: tfrunner.Backend{Type: w.BackendType}, Variables: w.Variables,
		SensitiveVariables: w.SensitiveVariables, Env: w.Env, Kubeconfig: w.Kubeconfig, Tenant: w.Tenant,
	}
	if len(w.BackendConfig) > 0 {
		s.Backend.Config = map[string]cty.Value{}
		for k, v := range w.BackendConfig {
			s.Backend.Config[k] = v.Value
		}
	}
	return s
}

// Result is a run's outcome: what tfrunner.Pool returned, with its error by kind.
type Result struct {
	Apply *tfrunner.ApplyResult  `json:"apply,omitempty"`
	Drift *tfrunner.StreamResult `json:"drift,omitempty"`
	// ErroredState is the state Terraform could not save to the backend (errored.tfstate).
	ErroredState []byte `json:"erroredState,omitempty"`
	// ImportErrors are Apply.Imports[i].Err, by index (an error does not encode as JSON).
	ImportErrors map[int]*WireError `json:"importErrors,omitempty"`
	Error        *WireError         `json:"error,omitempty"`
}

// newResult is the Result of a run that returned apply, drift and err.
func newResult(apply *tfrunner.ApplyResult, drift *tfrunner.StreamResult, err error) *Result {
	r := &Result{Apply: apply, Drift: drift, Error: encodeError(err)}
	if apply != nil {
		for i, imp := range apply.Imports {
			if imp.Err != nil {
				if r.ImportErrors == nil {
					r.ImportErrors = map[int]*WireError{}
				}
				r.ImportErrors[i] = encodeError(imp.Err)
			}
		}
	}
	return r
}

// applyResult returns Apply with its imports' errors restored.
func (r *Result) applyResult() *tfrunner.ApplyResult {
	if r.Apply == nil {
		return &tfrunner.ApplyResult{}
	}
	for i, e := range r.ImportErrors {
		if i >= 0 && i < len(r.Apply.Imports) {
			r.Apply.Imports[i].Err = e.decode(nil)
		}
	}
	return r.Apply
}

// Error kinds of WireError.
const (
	ErrorRun       = "run"       // *tfrunner.RunError
	ErrorLock      = "lock"      // *tfrunner.LockError
	ErrorStopped   = "stopped"   // a hook's answer stopped the run (tfrunner.ErrStopped)
	ErrorCancelled = "cancelled" // the run was cancelled (context.Canceled)
	ErrorOther     = "other"
)

// WireError carries an error across the stream by kind, so that the manager finds it with
// errors.As / errors.Is as it would the in-process pool's.
type WireError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// Killed is tfrunner.Killed of the error: Terraform did not end on its own, so creates it
	// started are in doubt. The manager's error then wraps tfrunner.ErrProcessLost.
	Killed bool                `json:"killed,omitempty"`
	Run    *tfrunner.RunError  `json:"run,omitempty"`
	Lock   *tfrunner.LockError `json:"lock,omitempty"`
}

// encodeError classifies err for the stream; nil stays nil.
func encodeError(err error) *WireError {
	if err == nil {
		return nil
	}
	w := &WireError{Kind: ErrorOther, Message: err.Error(), Killed: tfrunner.Killed(err)}
	var re *tfrunner.RunError
	var le *tfrunner.LockError
	switch {
	case errors.As(err, &le):
		w.Kind, w.Lock = ErrorLock, le
	case errors.Is(err, tfrunner.ErrStopped):
		w.Kind = ErrorStopped
	case errors.As(err, &re):
		w.Kind, w.Run = ErrorRun, &tfrunner.RunError{Op: re.Op, Message: re.Message}
	case errors.Is(err, context.Canceled):
		w.Kind = ErrorCancelled
	}
	return w
}

// decode returns the error the stream carried; hookErr is the manager's own hook error for
// ErrorStopped (the original, with its type).
func (w *WireError) decode(hookErr error) error {
	if w == nil {
		return nil
	}
	cause := errors.New(w.Message)
	if w.Killed {
		cause = fmt.Errorf("%s: %w", w.Message, tfrunner.ErrProcessLost)
	}
	switch w.Kind {
	case ErrorRun:
		if w.Run != nil {
			return &tfrunner.RunError{Op: w.Run.Op, Message: w.Run.Message, Err: cause}
		}
	case ErrorLock:
		if w.Lock != nil {
			return w.Lock
		}
	case ErrorStopped:
		if hookErr != nil {
			return fmt.Errorf("%w: %w", tfrunner.ErrStopped, hookErr)
		}
		return fmt.Errorf("%w: %s", tfrunner.ErrStopped, w.Message)
	case ErrorCancelled:
		if w.Killed {
			return fmt.Errorf("%w: %w", cause, context.Canceled)
		}
		return fmt.Errorf("%s: %w", w.Message, context.Canceled)
	}
	return cause
}

// jsonCodec is the protocol's gRPC codec: encoding/json, content-subtype "json".
type jsonCodec struct{}

func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
func (jsonCodec) Name() string                       { return "json" }

var _ encoding.Codec = jsonCodec{}

// runStreamDesc describes Runs/Run, bidirectional, for clients.
var runStreamDesc = &serviceDesc.Streams[0]

// runsService is the handler type gRPC checks the Dispatcher against.
type runsService interface {
	serveRun(grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*runsService)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Run", ServerStreams: true, ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error { return srv.(runsService).serveRun(stream) },
	}},
	Metadata: "conductor-tf/internal/runners/protocol.go",
}
