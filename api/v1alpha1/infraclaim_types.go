package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClaimResources are the quantities a claim asks for, as a PVC's resources.
type ClaimResources struct {
	// Requests maps resource names (e.g. "storage") to the minimum quantity the claim needs.
	// A resource satisfies the claim when its capacity covers every request.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// Each value is a non-negative quantity of at most 64 characters whose exponent, if any, has at
	// most 3 digits (RequestPattern, checked at admission).
	Requests Quantities `json:"requests,omitempty"`
	// Unparsed holds, as written, the requests the controller could not read as quantities
	// (admission rejects them; objects stored before that rule may still have them). Never
	// serialized on its own: MarshalJSON writes them back under requests.
	Unparsed map[string]string `json:"-"`
}

// InfraClaimSpec is an application team's request for infrastructure.
// +kubebuilder:validation:XValidation:rule="!has(self.scheduling) || !has(self.scheduling.classSelection) || self.scheduling.classSelection == 'Default' || !has(self.className) || size(self.className) == 0",message="spec.scheduling.classSelection chooses a class for a claim that names none: leave out spec.className or the selection"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.resourceName) || size(oldSelf.resourceName) == 0 || (has(self.resourceName) && self.resourceName == oldSelf.resourceName)",message="resourceName cannot be changed once set"
type InfraClaimSpec struct {
	// ResourceKind is the kind of infrastructure asked for (e.g. ObjectStore).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="resourceKind is immutable"
	ResourceKind string `json:"resourceKind"`

	// ClassName names the InfraClass to provision from; when empty, the default class of the kind.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="className is immutable"
	ClassName string `json:"className,omitempty"`

	// ResourceName binds the claim to this InfraResource (static, pre-bound). The controller sets it
	// when it binds the claim, as the PV controller sets a PVC's volumeName; it cannot change once set.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ResourceName string `json:"resourceName,omitempty"`

	// Scheduling chooses for a claim that names no class: the cheapest class that fits, and zones
	// spread with the namespace's other claims of a group.
	// +optional
	Scheduling *ClaimScheduling `json:"scheduling,omitempty"`

	// Selector restricts binding to resources whose labels match.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Requirements are matched against resource capabilities. A value that parses as a semver
	// constraint (">= 5.6", "~8.0") is matched as one; any other value must be equal.
	// +optional
	Requirements map[string]string `json:"requirements,omitempty"`

	// Resources are quantities the bound resource's capacity must cover.
	// +optional
	Resources ClaimResources `json:"resources,omitempty"`

	// Parameters are free values offered to class templates as claim.spec.parameters.
	// +optional
	Parameters Variables `json:"parameters,omitempty"`

	// ParametersFrom are values read from other claims' module outputs (see ParameterFrom): the
	// claim is provisioned only once every claim it reads is Ready, and its resource is rendered
	// again whenever a value it reads changes. A claim cannot read itself; longer cycles are refused
	// by the controller (InputsReady False, DependencyCycle).
	// +optional
	// +listType=map
	// +listMapKey=parameter
	// +kubebuilder:validation:MaxItems=32
	ParametersFrom []ParameterFrom `json:"parametersFrom,omitempty"`

	// WriteConnectionSecretToRef names the Secret, in the claim's namespace, that receives the module's
	// outputs (sensitive ones included).
	// +optional
	WriteConnectionSecretToRef *LocalSecretReference `json:"writeConnectionSecretToRef,omitempty"`

	// Lifetime is how long the claim lives from its creation (a Go duration, e.g. "72h"): at its
	// end the claim is deleted and its resource reclaimed by its reclaim policy, with a Warning
	// event and the LifetimeEnding condition ahead of time (the class's lifetimeNotice). Bounded by
	// the class's maxLifetime; unset, the class's maxLifetime applies, or none. Extending is an edit.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="lifetime must be a duration above 0s and at most 2562047h (what a Go duration holds)"
	Lifetime *Duration `json:"lifetime,omitempty"`
}

// ClaimPhase is where a claim is in its life, as PersistentVolumeClaimPhase.
// +kubebuilder:validation:Enum=Pending;Bound;Lost
type ClaimPhase string

const (
	// ClaimPending: not bound yet.
	ClaimPending ClaimPhase = "Pending"
	// ClaimBound: bound to a resource.
	ClaimBound ClaimPhase = "Bound"
	// ClaimLost: the bound resource no longer exists.
	ClaimLost ClaimPhase = "Lost"
)

// InfraClaimStatus is what the controller observed of a claim.
type InfraClaimStatus struct {
	// Phase: Pending, Bound or Lost.
	// +optional
	Phase ClaimPhase `json:"phase,omitempty"`
	// ResourceName is the bound resource.
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
	// Capacity of the bound resource.
	// +optional
	Capacity Quantities `json:"capacity,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Bound, and Ready mirroring the bound resource's Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Inputs is what the claim reads from other claims (spec.parametersFrom) and which claims read
	// it.
	// +optional
	Inputs *ClaimInputs `json:"inputs,omitempty"`
	// MonthlyCost is the estimated monthly cost of the resource the claim holds: its class's price
	// (spec.price) for the resource's capacity, a decimal amount with two places ("12.50"), kept up
	// to date when the class's price changes. Absent when the resource's class has no price.
	// +optional
	MonthlyCost string `json:"monthlyCost,omitempty"`
	// ExpiresAt is when the claim is deleted: its creation plus its lifetime (spec.lifetime bounded
	// by the class's maxLifetime); unset when it has none.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// InfraClaim asks for a piece of infrastructure by kind and requirements. It is to an InfraResource
// what a PersistentVolumeClaim is to a PersistentVolume.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="!has(self.spec.parametersFrom) || self.spec.parametersFrom.all(p, p.claim != self.metadata.name || (has(p.namespace) && size(p.namespace) > 0))",message="spec.parametersFrom: a claim cannot read its own outputs"
// +kubebuilder:resource:scope=Namespaced,shortName=iclaim,categories=conductor
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.resourceKind`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.spec.className`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Resource",type=string,JSONPath=`.status.resourceName`
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.status.capacity.storage`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Cost",type=string,JSONPath=`.status.monthlyCost`,priority=1,description="Estimated monthly cost of the resource held"
// +kubebuilder:printcolumn:name="Inputs",type=string,JSONPath=`.status.conditions[?(@.type=="InputsReady")].reason`,priority=1
// +kubebuilder:printcolumn:name="Waiting",type=string,JSONPath=`.status.conditions[?(@.type=="ChangePending")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InfraClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InfraClaimSpec   `json:"spec"`
	Status InfraClaimStatus `json:"status,omitempty"`
}

// InfraClaimList is a list of InfraClaims.
//
// +kubebuilder:object:root=true
type InfraClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InfraClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InfraClaim{}, &InfraClaimList{})
}
