// Package runners runs Terraform outside the manager's pod: runner processes (`conductor-tf
// runner`, one Deployment per InfraRunnerPool) pull runs from the manager over a gRPC stream, run
// them with their own tfrunner.Pool, and stream the run's events, heartbeats and outcome back. The
// manager side (Dispatcher) implements the controller's Runs interface, so the reconciler does not
// know where a run executes.
//
// The wire format is gRPC (google.golang.org/grpc) with protocol buffers: the service and its
// messages are defined in proto/conductor/runner/v1/runner.proto, generated into package runnerpb
// (make generate-proto), and converted from and to package tfrunner's types in convert.go. One
// bidirectional stream, Runs/Run, per run. The runner opens it and says Hello; the manager answers
// with the run's RunSpec once one is queued for the runner's pool; then the runner sends the run's
// events (applying, create_start), Heartbeats and finally its Result, and the manager answers each
// event with an Answer once it recorded it, or cancels the run (Cancel). The gate between plan and
// apply travels as data in the RunSpec; a held plan comes back in the Result.
package runners

// ServiceName is the gRPC service of the run protocol (runnerpb.Runs_ServiceDesc.ServiceName).
const (
	ServiceName = "conductor.runner.v1.Runs"
	// Audience is the audience of the projected ServiceAccount tokens runners authenticate with;
	// the manager's TokenReview accepts no other.
	Audience = "conductor-tf-runner"
)
