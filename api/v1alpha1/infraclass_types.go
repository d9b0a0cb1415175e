package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InfraClassSpec describes how to provision resources of one kind from a versioned module.
// +kubebuilder:validation:XValidation:rule="!has(self.sharing) || (!has(self.readyPool) && !has(self.discovery))",message="a sharing class has no readyPool and no discovery: its claims get shares of shared resources it provisions"
type InfraClassSpec struct {
	// ResourceKind is the abstract kind this class serves (e.g. ObjectStore, RelationalDatabase);
	// claims ask for a kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9]*$`
	ResourceKind string `json:"resourceKind"`

	// Default makes this the class of claims of its kind that name no class. At most one class per
	// kind may be the default; claims of a kind with two defaults are not provisioned.
	// +optional
	Default bool `json:"default,omitempty"`

	// Module is the versioned Terraform/OpenTofu module that provisions resources of this class.
	Module ModuleSource `json:"module"`

	// Variables is the resource template: one Terraform input variable each. Strings are HCL template
	// expressions evaluated against `claim` (name, namespace, labels, annotations, spec) and `class`
	// (name, spec.capabilities), with go-cty's standard functions plus gibibytes(), mebibytes() and
	// bytes() for quantities. Other values pass through typed.
	// +optional
	Variables Variables `json:"variables,omitempty"`

	// ImportIdentities are import ID templates by resource address inside the module
	// ("aws_db_instance.this": "${claim.namespace}-${claim.name}"), rendered like variables into
	// the resources the class provisions: the IDs Terraform's import takes for those objects. After
	// a run that died mid-create, an address with an identity is imported when its object exists
	// (adopted, never created twice) and created when the provider finds none
	// (interruptedCreates: Resolve).
	// +optional
	ImportIdentities map[string]string `json:"importIdentities,omitempty"`

	// RunInputs are what every run of the class's resources is given besides its variables: Secret
	// inputs, generated passwords, Kubernetes access, a cloud identity, module credentials and the
	// runner pool. Copied whole into the resources the class provisions.
	RunInputs `json:",inline"`

	// Capabilities are what resources of this class offer; claims' requirements are matched against
	// them. topology.kubernetes.io/zone and topology.kubernetes.io/region name where its resources
	// are, for claims that spread over zones (spec.scheduling.spread).
	// +optional
	Capabilities map[string]string `json:"capabilities,omitempty"`

	// Price is what one resource of this class costs per month (fixed, and per unit of capacity):
	// the claim's status shows the estimate, claims may ask for the cheapest class that fits, and
	// namespaces may be bounded by spend. Data the platform team writes; no price service is called.
	// +optional
	Price *ClassPrice `json:"price,omitempty"`

	// UpgradePolicy: Manual (default) leaves the resources this class provisioned on their module
	// version when the class moves to a newer one (they say UpgradeAvailable); Automatic moves them.
	// +optional
	// +kubebuilder:default=Manual
	UpgradePolicy UpgradePolicy `json:"upgradePolicy,omitempty"`

	// ReclaimPolicy of the resources this class provisions. Defaults to Delete.
	// +optional
	// +kubebuilder:default=Delete
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`

	// AllowExpansion lets a bound claim's requests grow (as a StorageClass's allowVolumeExpansion):
	// the resource's capacity and variables follow and apply through the destructive-change guard.
	// Without it, a grown request gets Resized=False (ExpansionNotAllowed) and changes nothing; a
	// shrunk request is always refused (ShrinkNotSupported).
	// +optional
	AllowExpansion bool `json:"allowExpansion,omitempty"`

	// AllowedNamespaces selects, by their labels, the namespaces whose claims may use this class (as
	// Gateway API's allowedRoutes.namespaces.selector; kubernetes.io/metadata.name names one
	// namespace). A claim of another namespace gets ClassNotAllowed and nothing is provisioned.
	// Absent: every namespace. Copied into the resources the class provisions.
	// +optional
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`

	// Limits bound what one namespace may provision from this class, where Kubernetes'
	// ResourceQuota cannot say it (its object count is per kind, not per class). A claim over a
	// limit gets ClassLimitReached and nothing is provisioned.
	// +optional
	Limits *ClassLimits `json:"limits,omitempty"`

	// MaxLifetime bounds the lifetime of this class's claims (a Go duration, e.g. "168h"): a claim
	// asking for more, or for none, lives this long from its creation. Unset: claims live as long
	// as they ask, or for ever.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxLifetime must be a duration above 0s and at most 2562047h (what a Go duration holds)"
	MaxLifetime *Duration `json:"maxLifetime,omitempty"`
	// LifetimeNotice is how long before a claim's end its LifetimeEnding condition and Warning
	// event come (default 1h).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="lifetimeNotice must be a duration above 0s and at most 2562047h (what a Go duration holds)"
	LifetimeNotice *Duration `json:"lifetimeNotice,omitempty"`

	// Discovery lists, with a module of data sources, the objects that exist outside the controller
	// and that this class's module could manage: each becomes an Available InfraResource of the
	// class (labelled conductor.io/discovered-by, reclaim policy Retain), never applied until a
	// claim binds it, whose first plan must then only import (docs/discovery.md).
	// +optional
	Discovery *ClassDiscovery `json:"discovery,omitempty"`

	// Sharing lets several claims share one resource of the class: each claim gets a share (the
	// per-claim module, bound to it alone) of a shared resource of the class's module, which is
	// reclaimed when its last share is gone (docs/sharing.md).
	// +optional
	Sharing *ClassSharing `json:"sharing,omitempty"`

	// ReadyPool keeps resources of this class provisioned before claims ask for them, so that a
	// claim binds at once (docs/claims.md#ready-pools).
	// +optional
	ReadyPool *ReadyPool `json:"readyPool,omitempty"`

	// Policy lists rules, in CEL, that every saved plan of the class's resources must pass before
	// it is applied (docs/policy.md). A rule that does not compile makes the class not Ready
	// (PolicyInvalid) and its resources' runs fail; no run ignores it.
	// +optional
	Policy *PlanPolicy `json:"policy,omitempty"`

	// Operations: approval, the destructive-change guard and the drift policy.
	Operations `json:",inline"`
}

// ReadyPool keeps resources of a class provisioned before claims ask for them (spec.readyPool): a
// claim of the class whose requests equal the pool's binds to a ready one at once, its own
// parameters rendered and applied after binding (an update; a change that would replace is held
// by the destructive-change guard as any), and the pool is refilled in the background.
type ReadyPool struct {
	// Size is how many unbound resources of the class the controller keeps provisioned (0 to 50).
	// Resources that are still provisioning count: a pool whose module fails does not grow.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=50
	Size int32 `json:"size"`
	// Resources are the requests pooled resources are rendered for and the capacity they have; a
	// claim binds from the pool only when its requests are these (else it is provisioned as
	// without a pool).
	// +optional
	Resources ClaimResources `json:"resources,omitempty"`
	// Parameters pooled resources are rendered with (claim.spec.parameters in the class's
	// templates; claim.name and claim.namespace are empty, resource.name is the pooled resource's
	// name and stays its name once bound: templates that name objects after resource.name keep
	// their names when a claim takes the resource).
	// +optional
	Parameters Variables `json:"parameters,omitempty"`
}

// ReadyPoolStatus counts a class's ready pool.
type ReadyPoolStatus struct {
	// Ready is how many pooled resources are Available to a claim now.
	Ready int32 `json:"ready"`
	// Provisioning is how many are being provisioned (or failed and are retried).
	Provisioning int32 `json:"provisioning"`
}

// ClassLimits bound, per namespace, the resources a class provisions. They count the resources of
// the class that claims of the namespace hold (provisioned, bound, or released and not deleted yet).
type ClassLimits struct {
	// MaxClaimsPerNamespace is how many resources of this class one namespace's claims may hold.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxClaimsPerNamespace *int32 `json:"maxClaimsPerNamespace,omitempty"`
	// MaxStoragePerNamespace bounds the sum of the storage capacity of those resources.
	// +optional
	MaxStoragePerNamespace *resource.Quantity `json:"maxStoragePerNamespace,omitempty"`
	// MaxMonthlyCostPerNamespace bounds the sum of the estimated monthly cost of those resources
	// (spec.price times their capacity; a decimal amount). A class with this limit must have a price.
	// +optional
	MaxMonthlyCostPerNamespace *resource.Quantity `json:"maxMonthlyCostPerNamespace,omitempty"`
}

// ModuleInput is an input variable the module declares.
type ModuleInput struct {
	// Name of the variable.
	Name string `json:"name"`
	// Type is the variable's type constraint as written in the module ("string", "number", "map(string)").
	// +optional
	Type string `json:"type,omitempty"`
	// Required is true when the variable has no default.
	Required bool `json:"required"`
	// Description from the module.
	// +optional
	Description string `json:"description,omitempty"`
	// Sensitive is true when the module marks the variable sensitive.
	// +optional
	Sensitive bool `json:"sensitive,omitempty"`
}

// ModuleOutput is an output the module declares.
type ModuleOutput struct {
	// Name of the output.
	Name string `json:"name"`
	// Sensitive outputs go only to the claim's connection Secret, never to any status.
	// +optional
	Sensitive bool `json:"sensitive,omitempty"`
	// Description from the module.
	// +optional
	Description string `json:"description,omitempty"`
}

// InfraClassStatus is what the controller observed of the class's module and templates.
type InfraClassStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is False with a reason when the module cannot be fetched or a template is invalid.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Inputs the module declares, read with hcl/v2.
	// +optional
	Inputs []ModuleInput `json:"inputs,omitempty"`
	// Outputs the module declares.
	// +optional
	Outputs []ModuleOutput `json:"outputs,omitempty"`
	// ReadyPool counts the class's ready pool; absent when it keeps none.
	// +optional
	ReadyPool *ReadyPoolStatus `json:"readyPool,omitempty"`
	// Discovery is what the class's last listing found; absent without spec.discovery.
	// +optional
	Discovery *DiscoveryStatus `json:"discovery,omitempty"`
}

// InfraClass is a platform team's recipe for one kind of infrastructure: a versioned module plus a
// template that turns a claim into the module's variables. It is to InfraResources what a StorageClass
// is to PersistentVolumes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=iclass,categories=conductor
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resourceKind`
// +kubebuilder:printcolumn:name="Default",type=boolean,JSONPath=`.spec.default`
// +kubebuilder:printcolumn:name="Module",type=string,JSONPath=`.spec.module.source`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.module.version`
// +kubebuilder:printcolumn:name="Reclaim",type=string,JSONPath=`.spec.reclaimPolicy`
// +kubebuilder:printcolumn:name="Monthly",type=string,JSONPath=`.spec.price.monthly`,priority=1,description="Fixed monthly price of one resource"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pool",type=integer,JSONPath=`.status.readyPool.ready`,description="Pooled resources ready for a claim"
// +kubebuilder:printcolumn:name="Pool-Size",type=integer,JSONPath=`.spec.readyPool.size`,priority=1
// +kubebuilder:printcolumn:name="Pool-Provisioning",type=integer,JSONPath=`.status.readyPool.provisioning`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InfraClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InfraClassSpec   `json:"spec"`
	Status InfraClassStatus `json:"status,omitempty"`
}

// InfraClassList is a list of InfraClasses.
//
// +kubebuilder:object:root=true
type InfraClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InfraClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InfraClass{}, &InfraClassList{})
}
