package v1alpha1

// RunResult is how a resource's run ended, or that it is under way: status.lastRun.result.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed;Invalid;WaitingForApproval
type RunResult string

// Run results.
const (
	// RunRunning: the run is recorded and under way (or waits for a runner slot).
	RunRunning RunResult = "Running"
	// RunSucceeded: the run did what it was for (an apply applied, a drift check or destroy ended).
	RunSucceeded RunResult = "Succeeded"
	// RunFailed: the run failed; the message and the Synced condition say why.
	RunFailed RunResult = "Failed"
	// RunInvalid: the run was refused before planning (variables do not fit the module); it is not
	// retried until the spec changes.
	RunInvalid RunResult = "Invalid"
	// RunWaitingForApproval: the run's plan waits for a person (the approve-plan annotation naming
	// its plan id) or was refused by the class's policy (status.pendingPlan says which).
	RunWaitingForApproval RunResult = "WaitingForApproval"
)

// Reasons a saved plan is held by its run's gate (tfrunner.Hold.Reason): the values of the
// resource's status.pendingPlan.reason, which the claim's ChangePending condition shows.
const (
	// HoldInterruptedCreate: the plan would create again an object whose create a dead run had
	// started (crossplane-runtime's create-pending, for Terraform), or, when the run died during its
	// apply holding the state lock, any object outside the state it may have created before it could
	// record it (CreatesUnrecorded).
	HoldInterruptedCreate = "InterruptedCreate"
	// HoldImportedReplaced: the plan would destroy or replace an imported object.
	HoldImportedReplaced = "ImportedObjectReplaced"
	// HoldManual: the resource's approval is Manual and the plan has changes.
	HoldManual = "Manual"
	// HoldDestructive: the plan would delete or replace an existing object (the class's
	// destructive-change guard).
	HoldDestructive = "DestructiveChange"
	// HoldPolicyApproval: a RequireApproval rule of the class's policy holds the plan.
	HoldPolicyApproval = "PolicyRequiresApproval"
	// HoldPolicyDenied: a Deny rule of the class's policy refuses the plan; no approval passes it.
	HoldPolicyDenied = "PolicyDenied"
)
