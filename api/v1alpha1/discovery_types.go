package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Discovery (issue 68, the design's first way infrastructure enters: "a new infrastructure
// 'function' is created and a kube resource is automatically created"): a class lists, with a
// module of data sources, the objects that exist outside the controller and could be managed by
// its module; each becomes an Available InfraResource waiting for a claim, as a static
// PersistentVolume waits.

// ClassDiscovery is a class's discovery: a module of data sources that lists candidates, and how
// often it lists.
type ClassDiscovery struct {
	// Module is the discovery module: OpenTofu data sources only (kubernetes_resources over
	// labelled objects, a cloud's list data source). Its output `candidates` is a list of objects,
	// one per object found: `id` (a string, stable and unique per object), `import_ids` (the
	// class module's resource addresses to their import IDs), `variables` (the class module's
	// input variables that describe the object as it is), and optionally `capacity` (quantities by
	// name, as strings) and `capabilities` (strings by name, added to the class's). A plan of the
	// discovery module that would change any managed object is refused (PolicyDenied, rule
	// discovery-read-only).
	Module ModuleSource `json:"module"`
	// Variables of the discovery module: typed values, passed as they are (not templates).
	// +optional
	Variables Variables `json:"variables,omitempty"`
	// Interval between listings (a Go duration, default 10m, at least 10s).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="discovery.interval must be at least 10s"
	Interval *Duration `json:"interval,omitempty"`
}

// DiscoveryStatus is what a class's last listing found.
type DiscoveryStatus struct {
	// ListingResource is the InfraResource that runs the discovery module (named
	// discovery-<class>, labelled conductor.io/discovery-of; never bound to a claim).
	ListingResource string `json:"listingResource"`
	// ListedAt is when the listing the counts come from ended (its run's completion).
	// +optional
	ListedAt *metav1.Time `json:"listedAt,omitempty"`
	// Candidates is how many objects the listing found.
	Candidates int32 `json:"candidates"`
	// Available is how many discovered resources wait for a claim; Bound how many a claim took;
	// Lost how many unbound ones the last listing no longer found.
	Available int32 `json:"available"`
	Bound     int32 `json:"bound"`
	Lost      int32 `json:"lost"`
}

const (
	// LabelDiscoveredBy marks a resource a class's discovery made (the class's name, LabelValue).
	LabelDiscoveredBy = "conductor.io/discovered-by"
	// LabelDiscoveryOf marks the resource that runs a class's discovery module (the class's name,
	// LabelValue): it is never a candidate for a claim.
	LabelDiscoveryOf = "conductor.io/discovery-of"
	// AnnotationDiscoveryID is the candidate's id in the listing (the discovery module's `id`).
	AnnotationDiscoveryID = "conductor.io/discovery-id"
	// AnnotationDiscoveryLost is set (to the time, RFC 3339) on a discovered resource whose object
	// the last listing no longer found; removed when a listing finds it again. An unbound one is
	// then Lost, and no claim binds it; a bound one is never deleted by discovery.
	AnnotationDiscoveryLost = "conductor.io/discovery-lost"

	// ConditionDiscovered on a class with spec.discovery: True once a listing's candidates are
	// resources; False with the listing's failure.
	ConditionDiscovered = "Discovered"

	// ReasonDiscovered: the resource was made by its class's discovery and waits for a claim; nothing
	// is planned or applied until one binds it (then its first plan must only import).
	ReasonDiscovered = "Discovered"
	// ReasonDiscoveryFailed: the class's discovery module could not list (its listing resource's
	// run failed or was refused), or its candidates output is not what discovery reads.
	ReasonDiscoveryFailed = "DiscoveryFailed"
	// ReasonCandidateLost: the last listing no longer found the object a discovered resource stands
	// for.
	ReasonCandidateLost = "CandidateLost"
)
