package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ModuleSource pins a Terraform/OpenTofu module at a version.
type ModuleSource struct {
	// Source is any Terraform module source address: a registry address
	// ("example.org/platform/minio/kubernetes"), a git URL ("git::https://example.org/m.git//rook-minio"),
	// or a local path the controller can read.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Source string `json:"source"`

	// Version is the exact module version: a registry version ("1.2.0") for registry sources, or the
	// git ref (tag or commit) for git sources, appended as "?ref=<version>" unless the source has one.
	// Required, so that every resource is pinned to what its class named when it was provisioned.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version"`
}

// SecretKeySelector names one key of a Secret in a given namespace.
type SecretKeySelector struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key within the Secret's data.
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// SecretInput is a named value read from a Secret at run time. The value is never copied into any
// object, event or log: it reaches Terraform as a variable or an environment variable of the run.
type SecretInput struct {
	// Name of the Terraform input variable (in variablesFrom) or the environment variable (in env).
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`
	// SecretKeyRef selects the value.
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// KubernetesAccess grants a module's runs Kubernetes credentials of their own. Without it a run
// gets none: no kubeconfig, no in-cluster settings, nothing of the controller's. With it, the
// controller asks the API server for a token of the named ServiceAccount for each run (the
// TokenRequest API, serviceaccounts/token create), writes a kubeconfig holding it into the run's
// workspace (KUBECONFIG and KUBE_CONFIG_PATH point at it, for kubectl and the kubernetes and helm
// providers) and deletes it when the run ends; the run can do what that account's RBAC allows.
type KubernetesAccess struct {
	// ServiceAccountName is a ServiceAccount in the controller's namespace (the only namespace
	// whose tokens the controller may request). A missing account fails the run with
	// ServiceAccountNotFound before anything runs. The controller's own account and runner pools'
	// are refused: at admission for the names the installation gives them
	// (conductor-tf-controller-manager, conductor-tf-runner-<pool>), and by the controller
	// (ServiceAccountForbidden) for an account a pool names itself.
	// +kubebuilder:validation:XValidation:rule="self != 'conductor-tf-controller-manager' && !self.startsWith('conductor-tf-runner-')",message="the controller's own ServiceAccount and runner pools' (conductor-tf-runner-*) cannot be granted to runs"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName"`
	// ExpirationSeconds is how long each run's token is valid, in seconds: from 600 (the
	// TokenRequest API's minimum) to 86400. Default 3600: a run longer than that loses access.
	// +optional
	// +kubebuilder:validation:Minimum=600
	// +kubebuilder:validation:Maximum=86400
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`
}

// ReclaimPolicy says what happens to a resource and its infrastructure when its claim is deleted.
// It mirrors PersistentVolumeReclaimPolicy.
// +kubebuilder:validation:Enum=Delete;Retain
type ReclaimPolicy string

const (
	// ReclaimDelete destroys the infrastructure (terraform destroy), then deletes the state Secret and
	// the InfraResource. It is the default, as for a StorageClass.
	ReclaimDelete ReclaimPolicy = "Delete"
	// ReclaimRetain keeps the infrastructure and its state: the resource becomes Released and is not
	// bound again. Deleting a retained resource orphans its state instead of destroying anything.
	ReclaimRetain ReclaimPolicy = "Retain"
)

// UpgradePolicy says what happens to a class's resources when the class moves to a newer version
// of their module.
// +kubebuilder:validation:Enum=Manual;Automatic
type UpgradePolicy string

const (
	// UpgradeManual leaves each resource on its version and says UpgradeAvailable: the platform team
	// upgrades a resource by setting its spec.module.version. The default.
	UpgradeManual UpgradePolicy = "Manual"
	// UpgradeAutomatic moves each resource to the class's version, its variables rendered again from
	// the class's template; the plan goes through the approval gate and the destructive-change guard.
	UpgradeAutomatic UpgradePolicy = "Automatic"
)

// Variables maps Terraform input variable names to values. In a class, string values are HCL
// template expressions ("${claim.namespace}-${claim.name}") and other values pass through typed;
// in a resource they are the rendered values.
type Variables map[string]apiextensionsv1.JSON

// Quantities maps resource names (e.g. "storage") to quantities, as a PVC's requests and a PV's
// capacity do.
type Quantities map[string]resource.Quantity

// LocalSecretReference names a Secret in the namespace of the object that holds the reference.
type LocalSecretReference struct {
	// Name of the Secret.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretReference names a Secret in a given namespace.
type SecretReference struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Condition types shared by the kinds of this API.
const (
	// ConditionReady is True when the object is usable: a class whose module and templates are valid,
	// a resource whose last apply succeeded, a claim whose bound resource is Ready.
	ConditionReady = "Ready"
	// ConditionBound is True when a claim is bound to a resource.
	ConditionBound = "Bound"
	// ConditionDrifted is True when the last drift check found the infrastructure changed outside
	// Terraform.
	ConditionDrifted = "Drifted"
	// ConditionSynced is True when a resource's infrastructure matches its spec (last plan/apply succeeded).
	ConditionSynced = "Synced"
	// ConditionLifetimeEnding is True on a claim whose lifetime ends within its class's notice.
	ConditionLifetimeEnding = "LifetimeEnding"
	// ConditionClaimsEnding (a class's) is True while its maxLifetime ends claims within its
	// lifetimeNotice (MaxLifetimeEndsClaims: the message says how many and which), False when it
	// ends none so soon (NoClaimsEnding); absent without a maxLifetime.
	ConditionClaimsEnding = "ClaimsEnding"
	// ConditionResized is False while a bound claim's change of requests is refused
	// (ExpansionNotAllowed, ShrinkNotSupported); an allowed growth is an Expanded event.
	ConditionResized = "Resized"
	// ConditionParametersApplied is False on a bound claim with parameters whose resource was not
	// provisioned from a class (static, discovered, or made by kubectl conductor adopt): its
	// variables are its own, and the claim's parameters do not reach it (ResourceNotFromClass);
	// absent otherwise.
	ConditionParametersApplied = "ParametersApplied"
	// ConditionUpgradeAvailable is True when the class a resource was provisioned from offers a newer
	// version of its module (reason NewerVersion), False when it does not (UpToDate).
	ConditionUpgradeAvailable = "UpgradeAvailable"
	// ConditionAdmissionChecked (a class's): whether claims of the class are checked at admission
	// by the ValidatingAdmissionPolicy the class keeps (ParametersChecked, NoParameters), or only
	// when they render (NotExpressible: the message says which variable and why).
	ConditionAdmissionChecked = "AdmissionChecked"
)

// Reasons of the UpgradeAvailable condition.
const (
	ReasonNewerVersion = "NewerVersion"
	ReasonUpToDate     = "UpToDate"
)

// Reasons of the ParametersApplied condition.
const (
	// ReasonResourceNotFromClass: the claim's parameters do not reach its resource, which was not
	// provisioned from a class (ParametersApplied=False).
	ReasonResourceNotFromClass = "ResourceNotFromClass"
)

// Reasons of the Resized condition.
const (
	ReasonExpanded            = "Expanded"
	ReasonExpansionNotAllowed = "ExpansionNotAllowed"
	ReasonShrinkNotSupported  = "ShrinkNotSupported"
)

// Condition reasons. Each one is an outcome a user must be able to tell apart.
const (
	ReasonBound                  = "Bound"
	ReasonWaitingForResource     = "WaitingForResource"
	ReasonNoMatchingResource     = "NoMatchingResource"
	ReasonClassNotFound          = "ClassNotFound"
	ReasonClassKindMismatch      = "ClassKindMismatch"
	ReasonMultipleDefaultClasses = "MultipleDefaultClasses"
	ReasonInvalidRequirement     = "InvalidRequirement"
	ReasonInvalidRequest         = "InvalidRequest"
	// ReasonClassNotAllowed and ReasonResourceNotAllowed: the class or resource is not offered to
	// the claim's namespace (spec.allowedNamespaces).
	ReasonClassNotAllowed    = "ClassNotAllowed"
	ReasonResourceNotAllowed = "ResourceNotAllowed"
	// ReasonClassLimitReached: provisioning would take the namespace over the class's limits.
	ReasonClassLimitReached = "ClassLimitReached"
	// ReasonSpendLimitReached: provisioning (or growing) would take the namespace's estimated
	// monthly cost over its class's maxMonthlyCostPerNamespace or its conductor.io/max-monthly-cost.
	ReasonSpendLimitReached = "SpendLimitReached"
	// ReasonNoClassFits: the claim asks for the cheapest class (or a spread over zones) and no class
	// of its kind fits it: none offered to its namespace, priced, ready and meeting its requirements.
	ReasonNoClassFits = "NoClassFits"
	// ReasonClassChosen: the claim's spec.scheduling chose the class named in the message (its
	// estimated cost, and the zone and how many of the claim's spread group are there).
	ReasonClassChosen = "ClassChosen"
	// ReasonPriceInvalid: a class's price has a unit that is not above zero, a negative amount, or
	// a spend limit without a price.
	ReasonPriceInvalid = "PriceInvalid"
	// ReasonBoundFromPool: the claim took a ready resource of its class's ready pool (an event).
	ReasonBoundFromPool = "BoundFromPool"
	// ReasonApplyingClaimParameters: the claim took a member of its class's ready pool, applied
	// with the pool's parameters; it is Ready once its own are applied (Ready False until then).
	ReasonApplyingClaimParameters = "ApplyingClaimParameters"
	// ReasonReadyPoolFailed: the class's ready pool could not provision a member (an event).
	ReasonReadyPoolFailed = "ReadyPoolFailed"
	// ReasonServiceAccountNotFound: spec.kubernetesAccess or spec.workloadIdentity names a ServiceAccount that does not
	// exist, or whose token the API server refused; nothing runs.
	ReasonServiceAccountNotFound = "ServiceAccountNotFound"
	// ReasonServiceAccountForbidden: spec.kubernetesAccess or spec.workloadIdentity names the controller's own
	// ServiceAccount or a runner pool's: a class would hand a run the controller's or a pool's
	// credentials; nothing runs.
	ReasonServiceAccountForbidden   = "ServiceAccountForbidden"
	ReasonResourceBoundToOtherClaim = "ResourceBoundToOtherClaim"
	ReasonResourceNotFound          = "ResourceNotFound"
	ReasonResourceMismatch          = "ResourceMismatch"
	ReasonProvisioning              = "Provisioning"
	ReasonProvisioningFailed        = "ProvisioningFailed"
	ReasonResourceLost              = "ResourceLost"
	ReasonResourceNotReady          = "ResourceNotReady"
	ReasonReleased                  = "Released"
	ReasonAvailable                 = "Available"
	ReasonApplied                   = "Applied"
	// ReasonOutputsNotInStatus (a Warning event on a resource): outputs larger than status keeps
	// (16 KiB each, 128 KiB in all) are only in the connection Secret.
	ReasonOutputsNotInStatus = "OutputsNotInStatus"
	ReasonRenderFailed       = "RenderFailed"
	ReasonInvalidVariables   = "InvalidVariables"
	ReasonSecretNotFound     = "SecretNotFound"
	// ReasonSecretInvalid: the moduleCredentials Secret holds keys it may not, or no credentials.
	ReasonSecretInvalid   = "SecretInvalid"
	ReasonInitFailed      = "InitFailed"
	ReasonPlanFailed      = "PlanFailed"
	ReasonApplyFailed     = "ApplyFailed"
	ReasonDestroyFailed   = "DestroyFailed"
	ReasonImportFailed    = "ImportFailed"
	ReasonStateLocked     = "StateLocked"
	ReasonModuleInvalid   = "ModuleInvalid"
	ReasonTemplateInvalid = "TemplateInvalid"
	// ReasonIdentityNotUnique: an importIdentities template of the class can render the same ID
	// for two resources (it does not name resource.name where it reads back).
	ReasonIdentityNotUnique    = "IdentityNotUnique"
	ReasonValid                = "Valid"
	ReasonReplaceNeedsApproval = "ReplaceNeedsApproval"
	ReasonAdoptionRefused      = "AdoptionRefused"
	ReasonWaitingForRunner     = "WaitingForRunner"
	// ReasonWaitingForApproval: a plan waits for the approve-plan annotation (Manual approval, or a
	// destructive change); ReasonPlanDiscarded: an approved or pending plan went stale.
	ReasonWaitingForApproval = "WaitingForApproval"
	ReasonPlanDiscarded      = "PlanDiscarded"
	// ReasonDriftDetected and ReasonNoDrift are the reasons of the Drifted condition.
	ReasonDriftDetected = "DriftDetected"
	ReasonNoDrift       = "NoDrift"
	// ReasonLifetimeEnding (the LifetimeEnding condition, a Warning event) and ReasonExpired (a
	// Warning event as the claim is deleted): a claim's lifetime ends within the class's notice,
	// or has ended.
	ReasonLifetimeEnding = "LifetimeEnding"
	// ReasonInvalidDuration: a duration of the object (or of the class it reads) is one the
	// controller cannot read, stored before the CRD refused it (LifetimeEnding or ClaimsEnding
	// Unknown, a Warning event); it counts as unset, so it never ends a claim.
	ReasonInvalidDuration = "InvalidDuration"
	ReasonExpired         = "Expired"
	// ReasonMaxLifetimeEndsClaims (ClaimsEnding=True, a Warning event on the class) and
	// ReasonNoClaimsEnding (ClaimsEnding=False).
	ReasonMaxLifetimeEndsClaims = "MaxLifetimeEndsClaims"
	ReasonNoClaimsEnding        = "NoClaimsEnding"
	// ReasonReconcilePaused: the resource carries conductor.io/paused=true; no plan, apply or
	// drift check runs until it is removed (Synced=False, as crossplane-runtime's ReconcilePaused).
	ReasonReconcilePaused = "ReconcilePaused"
	// ReasonRunnersConnected and ReasonNoRunners are the reasons of a runner pool's Ready
	// condition: runners are connected to the manager, or none is (its runs wait).
	ReasonRunnersConnected = "RunnersConnected"
	ReasonNoRunners        = "NoRunners"
	// ReasonServiceAccountShared: the pool's ServiceAccount also serves another pool; the
	// manager refuses the runners of both until each has an account of its own.
	ReasonServiceAccountShared = "ServiceAccountShared"
	// ReasonVolumeRefused: a volume of the pool projects a ServiceAccount token for the API server
	// or the run protocol, which its runs could read; no Deployment is made.
	ReasonVolumeRefused = "VolumeRefused"
	// ReasonStateNotSaved: a run's state could not be saved; the controller keeps it and runs
	// nothing until it is saved. ReasonStateSaved: it was saved later. ReasonPendingStateDiscarded:
	// it was discarded, as the stored state is newer (a run that started after it wrote it) and
	// records every resource it does, and kept in the state's history.
	ReasonStateNotSaved         = "StateNotSaved"
	ReasonStateSaved            = "StateSaved"
	ReasonPendingStateDiscarded = "PendingStateDiscarded"
	// ReasonStateMissing: a resource that was applied has no state; it is not planned from empty state.
	ReasonStateMissing = "StateMissing"
	// ReasonStateRestored and ReasonStateRestoreFailed: the restore annotation's outcome.
	ReasonStateRestored      = "StateRestored"
	ReasonStateRestoreFailed = "StateRestoreFailed"
	// ReasonResourceInUse: a Bound resource's deletion waits until its claim is gone (as
	// kubernetes.io/pv-protection).
	ReasonResourceInUse = "ResourceInUse"
	// ReasonStateNotOwned: the state under the resource's name is not its own (orphaned by another
	// resource, or adoption refused): reclaim leaves it, and the infrastructure, as they are.
	ReasonStateNotOwned = "StateNotOwned"
	// ReasonAbandoned: an operator abandoned the infrastructure of a resource whose state is missing
	// (conductor.io/abandon=true); it is left as it is.
	ReasonAbandoned = "Abandoned"
	// ReasonInterruptedCreate: a run that created objects died before it completed them; the plan
	// that would create them again waits for an approval (interruptedCreates: Hold).
	ReasonInterruptedCreate = "InterruptedCreate"
	// ReasonCreateAdopted (event): an object whose create a run that died had started exists, and
	// was imported into state with its import identity instead of being created again.
	ReasonCreateAdopted = "CreateAdopted"
	// ReasonRunAdopted (event): a run on a runner pool that the previous leader started went on
	// under this leader, which issued it new state credentials, instead of being killed.
	ReasonRunAdopted = "RunAdopted"
	// ReasonCreateRetried (event): the provider found no object with the import identity of a
	// create a run that died had started: it never happened, and is made now.
	ReasonCreateRetried = "CreateRetried"
	// Events of a resource's life (Normal unless said): ReasonStateAdopted, orphaned state taken
	// over; ReasonUpgrading, the class's newer module version written into the spec
	// (upgradePolicy Automatic); ReasonStateOrphaned, reclaim policy Retain kept the
	// infrastructure and labelled its state; ReasonDestroyed, reclaim policy Delete destroyed it;
	// ReasonStateLockRecovered (Warning), a lock a dead run of this controller left was released;
	// ReasonConnectionSecretWritten, the connection Secret was written again after it was deleted;
	// ReasonSecretInputsChanged, a Secret input changed since the last apply, which runs once;
	// ReasonPasswordsRotated, new generated passwords were made on request
	// (conductor.io/rotate-passwords) and go to the next apply.
	ReasonStateAdopted            = "StateAdopted"
	ReasonUpgrading               = "Upgrading"
	ReasonStateOrphaned           = "StateOrphaned"
	ReasonDestroyed               = "Destroyed"
	ReasonStateLockRecovered      = "StateLockRecovered"
	ReasonConnectionSecretWritten = "ConnectionSecretWritten"
	ReasonSecretInputsChanged     = "SecretInputsChanged"
	ReasonPasswordsRotated        = "PasswordsRotated"
	// ReasonCreateHeld (event): the controller cannot know whether a create a run that died had
	// started happened; the plan waits for a person (InterruptedCreate).
	ReasonCreateHeld = "CreateHeld"
	// ReasonCreatesInDoubt: the resource is being deleted while creates a run that died had started
	// are unresolved: they may exist outside any state, so the finalizer stays until they are
	// resolved or abandoned (conductor.io/abandon=true).
	ReasonCreatesInDoubt = "CreatesInDoubt"
)

// Well-known labels, annotations and finalizers.
const (
	// FinalizerClaim keeps a claim until its resource has been released.
	FinalizerClaim = "conductor.io/claim-protection"
	// FinalizerResource keeps a resource until its reclaim policy has been carried out.
	FinalizerResource = "conductor.io/reclaim"
	// FinalizerInUse keeps a Bound resource until its claim is gone, as kubernetes.io/pv-protection
	// keeps a PV bound to a PVC.
	FinalizerInUse = "conductor.io/resource-protection"
	// LabelClaimNamespace and LabelClaimName label a dynamically provisioned resource with its claim.
	LabelClaimNamespace = "conductor.io/claim-namespace"
	LabelClaimName      = "conductor.io/claim-name"
	// LabelClass labels a dynamically provisioned resource with its class.
	LabelClass = "conductor.io/class"
	// LabelReadyPool labels a resource of a class's ready pool that no claim has taken yet, with
	// the class (its name as LabelValue writes it); binding removes it.
	LabelReadyPool = "conductor.io/ready-pool"
	// LabelResource labels a state Secret with the resource that uses it.
	LabelResource = "conductor.io/resource"
	// LabelOrphanedFrom labels a state Secret that a deleted Retain resource left behind.
	LabelOrphanedFrom = "conductor.io/orphaned-from"
	// AnnotationProvisionedBy marks a resource the controller provisioned for a claim.
	AnnotationProvisionedBy = "conductor.io/provisioned-by"
	// AnnotationTakenFromPool marks a resource a claim took from its class's ready pool, with the
	// claim's UID, until the claim's own parameters are applied to it (status.observedGeneration
	// reaches the resource's generation); the claim reads Ready only then, and removes it.
	AnnotationTakenFromPool = "conductor.io/taken-from-pool"
	// AnnotationRenderedGeneration records the claim generation a provisioned resource's variables
	// were rendered from; a new claim generation renders them again.
	AnnotationRenderedGeneration = "conductor.io/rendered-from-generation"
	// AnnotationApproveReplace approves, by plan id, a plan that destroys or replaces imported objects.
	AnnotationApproveReplace = "conductor.io/approve-replace"
	// AnnotationRestoreState names the serial of a version in the state's history to restore as
	// the current state, before the next run; the controller removes it once done.
	AnnotationRestoreState = "conductor.io/restore-state-serial"
	// AnnotationStartFresh ("true") lets a resource that was applied, and whose state is gone, plan
	// from empty state (creating everything again); removed after the next successful apply.
	AnnotationStartFresh = "conductor.io/start-fresh"
	// AnnotationApprovePlan approves, by plan id, the plan that waits for approval
	// (status.pendingPlan.id); a newer plan discards the approval.
	AnnotationApprovePlan = "conductor.io/approve-plan"
	// AnnotationAbandon ("true") lets a Delete resource whose state is missing be deleted without a
	// destroy: its infrastructure is left as it is (an event says so).
	AnnotationAbandon = "conductor.io/abandon"
	// AnnotationPaused ("true") pauses a resource: no plan, apply or drift check runs, and Synced
	// is False with reason ReconcilePaused, until it is removed or set to anything else; deleting
	// the resource still reclaims it. Crossplane's crossplane.io/paused, Flux's suspend.
	AnnotationPaused = "conductor.io/paused"
	// AnnotationReconcileRequestedAt asks for a sync now: any value other than
	// status.lastHandledReconcileAt (by convention the time of the request) makes a run due — a
	// drift check when the spec was applied, else a plan and apply — and is echoed in
	// status.lastHandledReconcileAt when that run starts (Flux's reconcile.fluxcd.io/requestedAt).
	AnnotationReconcileRequestedAt = "conductor.io/reconcile-requested-at"
	// AnnotationRotatePasswords asks for new generated passwords (spec.generatedPasswords): any
	// value other than the one the resource's password Secret records as handled generates them
	// all again, with new versions, and makes a plan and apply due (by convention the time of the
	// request, as conductor.io/reconcile-requested-at).
	AnnotationRotatePasswords = "conductor.io/rotate-passwords"
)

// ApprovalMode says when a plan with changes is applied.
// +kubebuilder:validation:Enum=Automatic;Manual
type ApprovalMode string

// Approval modes.
const (
	// ApprovalAutomatic applies plans as they come (the destructive-change guard still applies).
	ApprovalAutomatic ApprovalMode = "Automatic"
	// ApprovalManual holds every plan with changes until the resource is annotated
	// conductor.io/approve-plan=<plan id>.
	ApprovalManual ApprovalMode = "Manual"
)

// DriftPolicy says what happens when the real infrastructure drifted from the state.
// +kubebuilder:validation:Enum=Correct;Report
type DriftPolicy string

// Drift policies.
const (
	// DriftCorrect re-applies the spec (through the same approval rules as any change).
	DriftCorrect DriftPolicy = "Correct"
	// DriftReport only reports the drift: condition Drifted and an event.
	DriftReport DriftPolicy = "Report"
)

// Operations are the day-2 rules of a resource, set on a class and copied into the resources it
// provisions.
type Operations struct {
	// Approval: Automatic (default) applies plans as they come; Manual holds every plan with changes
	// until the resource is annotated conductor.io/approve-plan=<plan id>.
	// +optional
	// +kubebuilder:default=Automatic
	Approval ApprovalMode `json:"approval,omitempty"`
	// AllowDestructiveChanges lets plans that delete or replace existing objects apply without
	// approval. Off by default: such plans wait for approval as in Manual. Destroy on reclaim
	// (reclaimPolicy Delete) is not affected.
	// +optional
	AllowDestructiveChanges bool `json:"allowDestructiveChanges,omitempty"`
	// DriftPolicy: Correct (default) re-applies when the infrastructure drifted from its state;
	// Report only reports it (condition Drifted, an event).
	// +optional
	// +kubebuilder:default=Correct
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`
	// InterruptedCreates says what happens to a create that a run that died had started
	// (status.createsPending), since it may have happened. Resolve (default) decides where the
	// controller can know: an object that lives only in state (random_*, time_*, tls_*,
	// terraform_data and null_resource without provisioners) is created again; an address with an
	// import identity (importIdentities) is imported when the object exists (adopted, not created
	// twice) and created when the provider finds none; the rest waits for approval with reason
	// InterruptedCreate. Hold makes every such plan wait for a person; Retry applies it, for
	// modules whose creates are idempotent.
	// +optional
	// +kubebuilder:default=Resolve
	InterruptedCreates InterruptedCreatesPolicy `json:"interruptedCreates,omitempty"`
	// WarmProviders: Allowed (default) lets applies reattach to provider processes the manager
	// keeps warm between runs of the same class, tenant, module and credentials (its
	// --warm-providers flag lists which providers: by default random, null, time, tls and http,
	// which read no files); Disabled starts every provider with its run, as Terraform does.
	// +optional
	// +kubebuilder:default=Allowed
	WarmProviders WarmProvidersPolicy `json:"warmProviders,omitempty"`
	// SyncInterval is how long an applied resource waits between drift checks (spread by ±10 %),
	// e.g. "1h" or "30m"; at least 10s. Unset: the manager's --sync-interval (10 minutes by default).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="syncInterval must be at least 10s"
	SyncInterval *Duration `json:"syncInterval,omitempty"`
}

// WarmProvidersPolicy says whether a resource's applies may use warm provider processes.
// +kubebuilder:validation:Enum=Allowed;Disabled
type WarmProvidersPolicy string

// Warm provider policies.
const (
	// WarmProvidersAllowed lets applies reattach to warm provider processes.
	WarmProvidersAllowed WarmProvidersPolicy = "Allowed"
	// WarmProvidersDisabled starts every provider with its run.
	WarmProvidersDisabled WarmProvidersPolicy = "Disabled"
)

// InterruptedCreatesPolicy says what happens to a create that a dead run may have carried out.
// +kubebuilder:validation:Enum=Resolve;Hold;Retry
type InterruptedCreatesPolicy string

// Interrupted-create policies (crossplane-runtime's create-pending protocol, for Terraform).
const (
	// InterruptedCreatesResolve retries, adopts or holds each create in doubt, as the controller
	// can know (see Operations.InterruptedCreates).
	InterruptedCreatesResolve InterruptedCreatesPolicy = "Resolve"
	// InterruptedCreatesHold waits for an approval of the plan that would create again.
	InterruptedCreatesHold InterruptedCreatesPolicy = "Hold"
	// InterruptedCreatesRetry applies it: the module's creates are idempotent.
	InterruptedCreatesRetry InterruptedCreatesPolicy = "Retry"
)

// CreatesUnrecorded is the entry of status.createsPending that stands for creates a dead run may
// have started without a record: the run died during its apply holding the state lock (the
// witness that Terraform was applying), and Terraform calls a provider's create right after it
// writes apply_start, without waiting for the controller to read and record it, so a kill
// between the two leaves an object no state and no record holds. Every create the next plan
// makes of an object outside Terraform's state is then in doubt (tfrunner.Gate.InDoubt).
const CreatesUnrecorded = "*"

// GeneratedPassword is a password the controller generates for each resource and keeps in a
// Secret of its own (tfpassword-<state Secret's name>, in the controller's namespace), never in
// the resource's state or plans: it reaches the module only as an ephemeral input variable
// (Terraform ≥ 1.10, OpenTofu ≥ 1.11: `ephemeral = true`), which the module passes to a
// write-only attribute (aws_db_instance.password_wo, kubernetes_secret_v1.data_wo), and the
// claim's connection Secret gets it beside the module's outputs. The pattern is Terraform's
// write-only arguments, with the controller as the password's keeper.
// +kubebuilder:validation:XValidation:rule="!has(self.versionVariable) || self.versionVariable != self.variable",message="versionVariable must differ from variable"
type GeneratedPassword struct {
	// Variable is the module's input variable that receives the password. The module must declare
	// it `ephemeral = true`: a run of a module that does not fails with InvalidVariables, before
	// anything is planned, so that the password is never written into a plan or a state.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=128
	Variable string `json:"variable"`
	// VersionVariable, when set, is a number input variable of the module that receives the
	// password's version: the Unix time, in seconds, at which the controller generated it, so a
	// new version always differs from every earlier one. Modules pass it to the write-only
	// attribute's version argument (password_wo_version, data_wo_revision), which is what makes
	// the provider send a rotated password: a write-only value is not compared with anything.
	// +optional
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=128
	VersionVariable string `json:"versionVariable,omitempty"`
	// Length of the password in characters (letters and digits, from a cryptographic random
	// source: 5.95 bits each). Default 32.
	// +optional
	// +kubebuilder:default=32
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=128
	Length int32 `json:"length,omitempty"`
	// ConnectionSecretKey is the key of the connection Secret that holds the password; default the
	// variable's name. It replaces a module output of the same name.
	// +optional
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:MaxLength=253
	ConnectionSecretKey string `json:"connectionSecretKey,omitempty"`
}

// SecretKey is the connection Secret's key of the password: ConnectionSecretKey, else Variable.
func (p GeneratedPassword) SecretKey() string {
	if p.ConnectionSecretKey != "" {
		return p.ConnectionSecretKey
	}
	return p.Variable
}
