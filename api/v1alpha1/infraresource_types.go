package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ClassReference names an InfraClass.
type ClassReference struct {
	// Name of the InfraClass.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ClaimReference names the claim a resource is bound to, as a PV's claimRef.
type ClaimReference struct {
	// Namespace of the claim.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// Name of the claim.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// UID of the claim; empty while the resource is only pre-bound by name.
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// ImportTarget adopts existing infrastructure with terraform import before the first apply.
type ImportTarget struct {
	// Address of the resource inside the module (e.g. "aws_db_instance.this"); the controller
	// prefixes "module.main.".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Address string `json:"address"`
	// ID is the provider's import id of the existing object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ID string `json:"id"`
}

// InfraResourceSpec is one piece of infrastructure: a pinned module plus its rendered variables.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.classRef) || (has(self.classRef) && self.classRef == oldSelf.classRef)",message="classRef is immutable"
type InfraResourceSpec struct {
	// ResourceKind is the abstract kind of this resource.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="resourceKind is immutable"
	ResourceKind string `json:"resourceKind"`

	// ClassRef is the class this resource was provisioned from; absent for hand-made (static) resources.
	// +optional
	ClassRef *ClassReference `json:"classRef,omitempty"`

	// AllowedNamespaces selects, by their labels, the namespaces whose claims may bind this
	// resource (kubernetes.io/metadata.name names one namespace); a claim of another namespace that
	// names it gets ResourceNotAllowed, and it is never a candidate for one. Absent: every namespace.
	// +optional
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`

	// Module is the pinned module; copied from the class at provisioning time.
	Module ModuleSource `json:"module"`

	// Variables are the rendered input variables (never secrets).
	// +optional
	Variables Variables `json:"variables,omitempty"`

	// ImportIdentities are the import IDs of the module's objects by resource address inside the
	// module (rendered from the class's importIdentities, or written by hand): after a run that died
	// mid-create, an address with an identity is imported when its object exists and created when
	// the provider finds none (interruptedCreates: Resolve).
	// +optional
	ImportIdentities map[string]string `json:"importIdentities,omitempty"`

	// RunInputs are what every run of this resource is given besides its variables; copied from
	// the class at provisioning time (a static resource sets them itself).
	RunInputs `json:",inline"`

	// Capacity this resource offers (e.g. storage: 50Gi).
	// +optional
	Capacity Quantities `json:"capacity,omitempty"`

	// Capabilities this resource offers, matched against claims' requirements.
	// +optional
	Capabilities map[string]string `json:"capabilities,omitempty"`

	// ClaimRef is the claim this resource is bound to; set by binding, or by an admin to pre-bind.
	// +optional
	ClaimRef *ClaimReference `json:"claimRef,omitempty"`

	// ReclaimPolicy: Delete destroys the infrastructure when the claim goes away; Retain keeps it.
	// +optional
	// +kubebuilder:default=Delete
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// Operations: approval, the destructive-change guard and the drift policy.
	Operations `json:",inline"`

	// Import adopts existing infrastructure with terraform import before the first plan.
	// +optional
	// +listType=map
	// +listMapKey=address
	Import []ImportTarget `json:"import,omitempty"`

	// AdoptState names an orphaned state Secret (in the controller's namespace) that becomes this
	// resource's state before its first plan.
	// +optional
	AdoptState string `json:"adoptState,omitempty"`

	// WriteConnectionSecretToRef receives the outputs when the resource is used without a claim.
	// +optional
	WriteConnectionSecretToRef *SecretReference `json:"writeConnectionSecretToRef,omitempty"`
}

// ResourcePhase is where a resource is in its life, as PersistentVolumePhase.
// +kubebuilder:validation:Enum=Pending;Provisioning;Available;Bound;Released;Deleting;Failed;Lost
type ResourcePhase string

const (
	ResourcePending      ResourcePhase = "Pending"
	ResourceProvisioning ResourcePhase = "Provisioning"
	ResourceAvailable    ResourcePhase = "Available"
	ResourceBound        ResourcePhase = "Bound"
	ResourceReleased     ResourcePhase = "Released"
	ResourceDeleting     ResourcePhase = "Deleting"
	ResourceFailed       ResourcePhase = "Failed"
	// ResourceLost: a discovered resource, unbound, whose object its class's last listing no
	// longer found (conductor.io/discovery-lost); no claim binds it.
	ResourceLost ResourcePhase = "Lost"
)

// PlanSummary counts the changes of a plan, as terraform show -json reports them.
type PlanSummary struct {
	Add     int32 `json:"add"`
	Change  int32 `json:"change"`
	Destroy int32 `json:"destroy"`
	Import  int32 `json:"import"`
}

// RunStatus describes the last Terraform run of a resource.
type RunStatus struct {
	// Operation is the Terraform command the run ended in — init, get, plan, show, import, apply
	// or destroy — or what the run was or what stopped it before Terraform ran: drift (a drift
	// check), restore (the restore-state annotation), render (a Secret input or credential could
	// not be read), adopt (orphaned state refused), state (the state could not be saved, read or
	// is missing), orphan (reclaim policy Retain could not orphan the state), output (the
	// connection Secret could not be written).
	Operation string `json:"operation"`
	// QueuedTime is when the run was recorded and asked for a runner slot.
	// +optional
	QueuedTime *metav1.Time `json:"queuedTime,omitempty"`
	// StartTime is when the run got its runner slot and its first command started (apply and
	// plan runs; a destroy's or drift check's is its QueuedTime): StartTime − QueuedTime is its
	// wait in line, CompletionTime − StartTime its duration.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime of the run; empty while it runs.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// Result: Running, Succeeded, Failed, Invalid (refused before planning: the variables do not
	// fit the module; not retried until the spec changes) or WaitingForApproval (a plan waits for
	// the approve-plan annotation). See RunResult.
	// +optional
	Result RunResult `json:"result,omitempty"`
	// Summary of the plan the run applied.
	// +optional
	Summary *PlanSummary `json:"summary,omitempty"`
	// Generation of the spec the run was for.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// ID names this run; it is recorded before the run starts.
	// +optional
	ID string `json:"id,omitempty"`
	// Who is the holder the run's state locks name (user@host, as Terraform computes it), recorded
	// before the run so that a lock it leaves behind when the controller dies can be recognised and
	// released. In a cluster it names the deployment (every pod of it has the same hostname), not
	// the pod, so a replacement pod recognises the locks of its predecessor.
	// +optional
	Who string `json:"who,omitempty"`
	// Controller is the pod (or host process) that started the run.
	// +optional
	Controller string `json:"controller,omitempty"`
	// Message is Terraform's error, trimmed, when the run failed.
	// +optional
	Message string `json:"message,omitempty"`
	// PlanID of the plan the run made or applied.
	// +optional
	PlanID string `json:"planID,omitempty"`
	// LogSecret (in the controller's namespace) holds the run's log (key log): Terraform's output,
	// sensitive values redacted by Terraform.
	// +optional
	LogSecret string `json:"logSecret,omitempty"`
	// Resolutions are what the run decided about creates a run that died had started
	// (interruptedCreates: Resolve), one per address.
	// +optional
	Resolutions []CreateResolution `json:"resolutions,omitempty"`
}

// CreateResolution is a run's decision about one create in doubt.
type CreateResolution struct {
	// Address of the object in the module's root (module.main.…).
	Address string `json:"address"`
	// Decision: Adopted (the object existed and was imported into state), Retried (the provider
	// found none: the create is made), or Held (the plan waits for a person).
	Decision string `json:"decision"`
	// ID is the import identity tried, if any.
	// +optional
	ID string `json:"id,omitempty"`
	// Reason says why, in words.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// StateStatus describes the resource's Terraform state.
type StateStatus struct {
	// SecretName of the state Secret in the controller's namespace.
	SecretName string `json:"secretName"`
	// Serial of the state.
	// +optional
	Serial int64 `json:"serial,omitempty"`
	// Lineage of the state.
	// +optional
	Lineage string `json:"lineage,omitempty"`
	// AdoptedFrom is the orphaned state Secret this resource adopted (spec.adoptState), once done.
	// +optional
	AdoptedFrom string `json:"adoptedFrom,omitempty"`
	// LockID of a lock held on the state, if any.
	// +optional
	LockID string `json:"lockID,omitempty"`
	// LockHolder is who holds that lock (Terraform's lock info: user@host).
	// +optional
	LockHolder string `json:"lockHolder,omitempty"`
	// LockedSince is when that lock was taken.
	// +optional
	LockedSince *metav1.Time `json:"lockedSince,omitempty"`
	// LockStale is true when the controller reports the lock as stale: held by someone other than
	// this deployment's live runs for longer than --stale-lock-after. Only such a lock may be
	// released by hand (kubectl conductor unlock); the controller never takes it itself.
	// +optional
	LockStale bool `json:"lockStale,omitempty"`
	// Destroyed is recorded by a Delete reclaim once destroy succeeded and before the state Secret
	// is deleted: a state missing afterwards is the reclaim's own deletion, never a lost state.
	// +optional
	Destroyed *StateDestroyed `json:"destroyed,omitempty"`
}

// StateDestroyed says that a reclaim destroyed the infrastructure a state recorded.
type StateDestroyed struct {
	// Serial of the state once destroy ended (its last version, holding no objects).
	Serial int64 `json:"serial"`
	// Time destroy ended.
	Time metav1.Time `json:"time"`
}

// ImportStatus records the outcome of one import.
type ImportStatus struct {
	// Address imported (with the module prefix).
	Address string `json:"address"`
	// ID imported.
	ID string `json:"id"`
	// Result: Imported, AlreadyInState or Failed.
	Result string `json:"result"`
	// Message on failure.
	// +optional
	Message string `json:"message,omitempty"`
}

// InfraResourceStatus is what the controller observed of a resource.
type InfraResourceStatus struct {
	// Phase: Pending, Provisioning, Available, Bound, Released, Deleting, Failed, or Lost (a
	// discovered resource whose object is gone).
	// +optional
	Phase ResourcePhase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the last successful apply was for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Synced and Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Outputs are the module's non-sensitive outputs.
	// +optional
	Outputs Variables `json:"outputs,omitempty"`
	// LastRun is the last Terraform run (running or ended); the ones before it are in runs.
	// +optional
	LastRun *RunStatus `json:"lastRun,omitempty"`
	// State is the resource's Terraform state.
	// +optional
	State *StateStatus `json:"state,omitempty"`
	// ConnectionSecret is the connection Secret last written with the module's outputs (the bound
	// claim's writeConnectionSecretToRef, else the resource's own). Every sync keeps it: written
	// again from the state when it was deleted, moved (the old one deleted) when the claim names
	// another.
	// +optional
	ConnectionSecret *SecretReference `json:"connectionSecret,omitempty"`
	// InputsHash is "sha256:" and the hash of the Secret inputs (variablesFrom, env) the last apply
	// ran with, never a value: a sync that reads a different hash applies once, through the
	// approval gate.
	// +optional
	InputsHash string `json:"inputsHash,omitempty"`
	// ModuleVersion is the module version the last successful apply ran with (for a registry
	// source pinned by a constraint, the exact version init chose): after a failed upgrade it
	// still names the version the infrastructure is on.
	// +optional
	ModuleVersion string `json:"moduleVersion,omitempty"`
	// AvailableModuleVersion is a newer version of the same module that the resource's class now
	// offers (condition UpgradeAvailable); empty when there is none. Upgrading is setting
	// spec.module.version to it.
	// +optional
	AvailableModuleVersion string `json:"availableModuleVersion,omitempty"`
	// Imports records each import's outcome.
	// +optional
	Imports []ImportStatus `json:"imports,omitempty"`
	// PendingPlan is the plan that waits for approval, if any.
	// +optional
	PendingPlan *PendingPlan `json:"pendingPlan,omitempty"`
	// Drift is what the last drift check found.
	// +optional
	Drift *DriftStatus `json:"drift,omitempty"`
	// Runs are the runs before lastRun, newest first (at most 4): a run moves here when the next
	// one starts. RunHistory returns lastRun and these as one list.
	// +optional
	Runs []RunStatus `json:"runs,omitempty"`
	// CreatesPending lists the module addresses whose create started (Terraform's apply_start) in a
	// run that has not ended: each is written before the run's next event is read, and the list is
	// cleared when the run's process ends on its own (its state saved). A list left by a run that
	// died (SIGKILL, pod deleted, OOM, node lost) makes the next plan that would create any of them
	// wait (interruptedCreates: Hold) with reason InterruptedCreate. "*" (CreatesUnrecorded) stands
	// for the creates a run that died holding the state lock during its apply may have started
	// without a record (Terraform calls the provider without waiting for its apply_start to be
	// read): every create of an object outside Terraform's state is then in doubt.
	// +optional
	CreatesPending []string `json:"createsPending,omitempty"`
	// CreatesPendingRun is the id of the run that started the creates in createsPending.
	// +optional
	CreatesPendingRun string `json:"createsPendingRun,omitempty"`
	// LastHandledReconcileAt is the value of the conductor.io/reconcile-requested-at annotation
	// that the last run started for answered (Flux's lastHandledReconcileAt).
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// PendingPlan is a saved plan waiting for approval.
type PendingPlan struct {
	// ID of the plan (12 hex characters of a hash of its changes); approve it with the annotation
	// conductor.io/approve-plan=<id>.
	ID string `json:"id"`
	// Reason it waits: InterruptedCreate, Manual, DestructiveChange, ImportedObjectReplaced,
	// PolicyRequiresApproval (a rule of the class's policy; approval applies it) or PolicyDenied
	// (a Deny rule: no approval applies it; a change of the spec or of the policy makes a new plan).
	Reason string `json:"reason"`
	// Rule is the policy rule that stopped the plan (destructive-change for the guard); "" for the
	// other reasons.
	// +optional
	Rule string `json:"rule,omitempty"`
	// Message is the rule's message with the addresses that broke it.
	// +optional
	Message string `json:"message,omitempty"`
	// PolicyDigest identifies the class's plan rules the plan was decided under (12 hex
	// characters; "" without rules): when the class's rules change, the plan is made again.
	// +optional
	PolicyDigest string `json:"policyDigest,omitempty"`
	// Summary of the plan.
	Summary PlanSummary `json:"summary"`
	// Changes lists "address: actions" of the plan's changes (at most 50).
	// +optional
	Changes []string `json:"changes,omitempty"`
	// Generation of the spec the plan was made for.
	Generation int64 `json:"generation"`
	// CreatedAt is when the plan was made.
	CreatedAt metav1.Time `json:"createdAt"`
	// Secret (in the controller's namespace) holds Terraform's rendering of the plan (key plan.txt;
	// sensitive values redacted by Terraform), readable by admins.
	// +optional
	Secret string `json:"secret,omitempty"`
}

// DriftStatus is what a drift check found.
type DriftStatus struct {
	// CheckedAt is when the check ran.
	CheckedAt metav1.Time `json:"checkedAt"`
	// Drifted is true when objects changed outside Terraform, or the plan has changes.
	Drifted bool `json:"drifted"`
	// Addresses of the objects that drifted.
	// +optional
	Addresses []string `json:"addresses,omitempty"`
}

// InfraResource is one piece of infrastructure managed with Terraform: a versioned module, its
// variables and its state. It is to an InfraClaim what a PersistentVolume is to a PVC.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ires,categories=conductor
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resourceKind`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.classRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.claimRef.name`
// +kubebuilder:printcolumn:name="Claim-Namespace",type=string,JSONPath=`.spec.claimRef.namespace`,priority=1
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.spec.capacity.storage`
// +kubebuilder:printcolumn:name="Reclaim",type=string,JSONPath=`.spec.reclaimPolicy`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.moduleVersion`,priority=1
// +kubebuilder:printcolumn:name="Upgrade",type=string,JSONPath=`.status.availableModuleVersion`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.conditions[?(@.type=="Synced")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InfraResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InfraResourceSpec   `json:"spec"`
	Status InfraResourceStatus `json:"status,omitempty"`
}

// InfraResourceList is a list of InfraResources.
//
// +kubebuilder:object:root=true
type InfraResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InfraResource `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InfraResource{}, &InfraResourceList{})
}
