package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Claims that read other claims' outputs (spec.parametersFrom), and the grant another namespace
// gives for it. The model is docs/dependencies.md's: a dependent is provisioned only once every
// claim it reads is Ready, is rendered again only when a value it reads changed (status.inputs.digest),
// and holds back the deletion of the claims it reads until its own resource is reclaimed, as
// Crossplane's Usage holds back the deletion of what is in use.

// ParameterFrom is one value a claim reads from another claim's module outputs.
type ParameterFrom struct {
	// Parameter names the value. Class templates read a non-sensitive one as inputs.<parameter>;
	// when the class's variables do not set a module variable of that name and the module declares
	// one, the value is passed to the module as that variable (a sensitive output as a sensitive
	// variable, read from the upstream's connection Secret at run time, never copied into any
	// object).
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=128
	Parameter string `json:"parameter"`
	// Claim is the name of the upstream InfraClaim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Claim string `json:"claim"`
	// Namespace of the upstream claim; empty: the claim's own. Another namespace must grant the
	// read with an InfraOutputGrant (as Gateway API's ReferenceGrant).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Output is the name of an output of the upstream's module.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=128
	Output string `json:"output"`
}

// UpstreamNamespace is the namespace of the claim p names, read by a claim of namespace own:
// p.Namespace, else own.
func (p ParameterFrom) UpstreamNamespace(own string) string {
	if p.Namespace != "" {
		return p.Namespace
	}
	return own
}

// ClaimInputs is what a claim reads from other claims and who reads it (status.inputs).
type ClaimInputs struct {
	// Digest is "sha256:" and the hex SHA-256 of every value the claim reads (a sensitive one by
	// the version of the Secret that holds it, never by its value), as last rendered into its
	// resource: the resource is rendered and planned again only when it changes.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Reads lists the values the claim reads, one per spec.parametersFrom entry, with the
	// non-sensitive value last read.
	// +optional
	// +listType=map
	// +listMapKey=parameter
	Reads []InputRead `json:"reads,omitempty"`
	// ReadBy lists the claims that read this claim's outputs, and their resources: while any of
	// them exists, deleting this claim waits (condition InUse, reason InUseByDependents).
	// +optional
	ReadBy []ClaimDependent `json:"readBy,omitempty"`
}

// InputRead is one value a claim reads.
type InputRead struct {
	// Parameter is spec.parametersFrom[].parameter.
	Parameter string `json:"parameter"`
	// Namespace and Claim name the upstream claim.
	Namespace string `json:"namespace"`
	Claim     string `json:"claim"`
	// Output read.
	Output string `json:"output"`
	// Sensitive is true for a sensitive output: its value is passed to runs from the upstream's
	// connection Secret and never shown.
	// +optional
	Sensitive bool `json:"sensitive,omitempty"`
	// Value last read (JSON), non-sensitive outputs only.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
	// Secret holds a sensitive output: the upstream's connection Secret and key.
	// +optional
	Secret *SecretKeySelector `json:"secret,omitempty"`
}

// ClaimDependent is a claim that reads this claim's outputs.
type ClaimDependent struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ResourceName is the dependent's resource, when bound: deleting this claim waits for it too.
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
}

// Condition types and reasons of claims that read other claims.
const (
	// ConditionInputsReady is True when every claim a claim reads (spec.parametersFrom) is Ready
	// and has the output read; absent on a claim that reads none.
	ConditionInputsReady = "InputsReady"
	// ConditionInUse is True while a claim being deleted waits for the claims that read it.
	ConditionInUse = "InUse"

	// ReasonInputsResolved: every value the claim reads is there.
	ReasonInputsResolved = "InputsResolved"
	// ReasonWaitingForUpstream: a claim this one reads is not Ready yet (not provisioned, or its
	// run has not ended): the claim is not provisioned (or rendered again) until it is.
	ReasonWaitingForUpstream = "WaitingForUpstream"
	// ReasonUpstreamNotFound: a claim this one reads does not exist (or is being deleted). A bound
	// claim keeps its infrastructure and its last values; nothing is rendered with empty values.
	ReasonUpstreamNotFound = "UpstreamNotFound"
	// ReasonOutputNotFound: the upstream's module has no such output, or a sensitive output has no
	// connection Secret to be read from.
	ReasonOutputNotFound = "OutputNotFound"
	// ReasonReferenceNotGranted: the upstream is in another namespace that grants no read to this
	// one (InfraOutputGrant).
	ReasonReferenceNotGranted = "ReferenceNotGranted"
	// ReasonDependencyCycle: the claims read each other in a cycle (named in the message): none of
	// them is provisioned or rendered again.
	ReasonDependencyCycle = "DependencyCycle"
	// ReasonInputNotAccepted: a parameter names a module variable the class sets itself, or a
	// sensitive output names no module variable: the class decides it.
	ReasonInputNotAccepted = "InputNotAccepted"
	// ReasonInUseByDependents: a claim's deletion waits for the claims that read it (named in the
	// message) and for their resources to be reclaimed.
	ReasonInUseByDependents = "InUseByDependents"
	// ReasonInputsChanged: a value the claim reads changed; its resource is rendered and planned
	// again (an event).
	ReasonInputsChanged = "InputsChanged"

	// AnnotationInputsDigest is set on a dependent's resource to its claim's status.inputs.digest
	// when the resource is rendered: a new digest with the same variables (a sensitive value
	// changed) wakes the resource, whose Secret inputs' hash then differs and it applies once.
	AnnotationInputsDigest = "conductor.io/inputs-digest"
	// FinalizerReadByClaims keeps an upstream claim's connection Secret while claims read a
	// sensitive output from it: their resources' runs (a destroy included) read it there, and
	// deleting a namespace would otherwise remove it before those runs end. The upstream claim's
	// release removes it once no claim reads it, and a connection Secret that moves loses it.
	FinalizerReadByClaims = "conductor.io/read-by-claims"
	// AnnotationReadsFrom lists, on a dependent's resource, the claims it reads
	// ("namespace/name", comma-separated): their deletion waits for this resource to be reclaimed.
	AnnotationReadsFrom = "conductor.io/reads-from"
)

// InfraOutputGrantSpec says which other namespaces may read which claims' outputs in this one.
type InfraOutputGrantSpec struct {
	// From lists the namespaces whose claims may read.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	From []GrantFrom `json:"from"`
	// Claims names the claims of this namespace that may be read; empty: every claim.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Claims []string `json:"claims,omitempty"`
}

// GrantFrom is a namespace allowed to read.
type GrantFrom struct {
	// Namespace allowed to read.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// InfraOutputGrant lets claims of other namespaces read outputs of claims in its namespace (their
// spec.parametersFrom), as Gateway API's ReferenceGrant lets routes reference Services across
// namespaces. Without one, a claim reads only claims of its own namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=igrant,categories=conductor
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InfraOutputGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec InfraOutputGrantSpec `json:"spec"`
}

// Grants reports whether the grant lets namespace ns read claim name of the grant's namespace.
func (g *InfraOutputGrant) Grants(ns, name string) bool {
	from := false
	for _, f := range g.Spec.From {
		from = from || f.Namespace == ns
	}
	if !from {
		return false
	}
	if len(g.Spec.Claims) == 0 {
		return true
	}
	for _, c := range g.Spec.Claims {
		if c == name {
			return true
		}
	}
	return false
}

// InfraOutputGrantList is a list of InfraOutputGrants.
//
// +kubebuilder:object:root=true
type InfraOutputGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InfraOutputGrant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InfraOutputGrant{}, &InfraOutputGrantList{})
}
