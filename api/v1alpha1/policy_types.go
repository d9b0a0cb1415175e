package v1alpha1

// PlanPolicy is a class's plan policy (spec.policy): rules every saved plan of its resources must
// pass between plan and apply, evaluated inside the run where the approval gate decides
// (internal/policy, docs/policy.md).
type PlanPolicy struct {
	// Rules in order: Deny rules first refuse a plan, then RequireApproval rules hold it; the
	// destructive-change guard (rule destructive-change) comes after them unless
	// allowDestructiveChanges.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Rules []PolicyRule `json:"rules"`
}

// PolicyRule is one plan rule: a CEL expression evaluated once per resource change of the plan,
// as a ValidatingAdmissionPolicy's validation is per request. True lets the change through; false
// or an evaluation error (a missing key, the cost limit) breaks the rule for that change.
// Variables: change (address, moduleAddress, mode, type, name, index, providerName, actions,
// before, after, afterUnknown, importing), plan (changes), claim (namespace, name,
// labels), class (name, labels), resource (name, labels).
type PolicyRule struct {
	// Name identifies the rule in the resource's conditions, events, metrics and pendingPlan.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Expression is CEL evaluating to a bool, e.g.
	// `change.type != 'google_storage_bucket' || change.after.public_access_prevention == 'enforced'`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
	// Action when a change breaks the rule: Deny refuses the plan (no approval applies it);
	// RequireApproval holds it until the plan is approved (conductor.io/approve-plan).
	// +kubebuilder:validation:Enum=Deny;RequireApproval
	Action PolicyAction `json:"action"`
	// Message says what the rule asks for, shown with the addresses that broke it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// PolicyAction is what a broken rule does to the plan.
type PolicyAction string

const (
	// PolicyDeny refuses the plan.
	PolicyDeny PolicyAction = "Deny"
	// PolicyRequireApproval holds the plan until approved.
	PolicyRequireApproval PolicyAction = "RequireApproval"
)
