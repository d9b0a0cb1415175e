package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cost and availability in scheduling (issue 68, the design's "scheduler that can be tailored to
// specific workloads enabling availability, performance, cost and capacity optimizations"): prices
// are data a platform team writes on its classes; no price service is ever called.

// ClassPrice is what one resource of a class costs per month, as the platform team prices it.
// Amounts are decimal numbers ("12.50") in the cluster's one currency, which the platform team
// chooses and names in its documentation: the controller adds and compares them, never converts.
type ClassPrice struct {
	// Monthly is the fixed price of one resource per month, whatever its capacity.
	// +optional
	Monthly *resource.Quantity `json:"monthly,omitempty"`
	// PerUnit prices capacity: for each capacity name ("storage"), the monthly price of one unit
	// ("0.10" per "1Gi"). A resource's cost counts its capacity in units, fractions included.
	// +optional
	// +listType=map
	// +listMapKey=resource
	// +kubebuilder:validation:MaxItems=16
	PerUnit []UnitPrice `json:"perUnit,omitempty"`
}

// UnitPrice is the monthly price of one unit of a capacity.
type UnitPrice struct {
	// Resource is the capacity name, as claims request it ("storage").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Resource string `json:"resource"`
	// Unit is the quantity one price is for ("1Gi"); above zero.
	Unit resource.Quantity `json:"unit"`
	// Monthly is the price of one unit per month ("0.10"); zero or above.
	Monthly resource.Quantity `json:"monthly"`
}

// ClassSelection is how a claim that names no class picks one.
// +kubebuilder:validation:Enum=Default;Cheapest
type ClassSelection string

const (
	// ClassSelectionDefault takes the kind's default class (spec.default), as a PVC with no
	// storageClassName takes the default StorageClass.
	ClassSelectionDefault ClassSelection = "Default"
	// ClassSelectionCheapest takes, among the priced classes of the kind that fit the claim, the
	// one whose estimated monthly cost for the claim's requests is lowest.
	ClassSelectionCheapest ClassSelection = "Cheapest"
)

// ClaimScheduling is how the controller chooses for a claim that names no class: by cost, and
// spread over zones or regions with the namespace's other claims of a group (as a pod's
// topologySpreadConstraints with whenUnsatisfiable: ScheduleAnyway).
type ClaimScheduling struct {
	// ClassSelection: Default (the kind's default class) or Cheapest (the priced class of the kind
	// that fits the claim at the lowest estimated monthly cost).
	// +optional
	// +kubebuilder:default=Default
	ClassSelection ClassSelection `json:"classSelection,omitempty"`
	// Spread puts the claim's resource in the zone (or region) that holds the fewest resources of
	// the namespace's claims its selector selects: among the Available resources it may bind, and
	// among the classes of its kind that fit it (each class names its zone in its capabilities).
	// +optional
	Spread *ClaimSpread `json:"spread,omitempty"`
}

// ClaimSpread spreads a group of claims' resources over a topology capability.
type ClaimSpread struct {
	// TopologyKey is the capability that names where a resource is: topology.kubernetes.io/zone
	// (TopologyZone) or topology.kubernetes.io/region (TopologyRegion), or another key the
	// platform team's classes use.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TopologyKey string `json:"topologyKey"`
	// Selector selects the claims of the namespace spread together (this claim among them, as a
	// topologySpreadConstraint's labelSelector); absent: every claim of the namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

const (
	// TopologyZone is the capability key naming a class's or resource's zone (Kubernetes' well-known
	// node label).
	TopologyZone = "topology.kubernetes.io/zone"
	// TopologyRegion is the capability key naming its region.
	TopologyRegion = "topology.kubernetes.io/region"

	// AnnotationMaxMonthlyCost on a Namespace bounds the estimated monthly cost of every resource
	// its claims hold, all classes together (a decimal amount, "500"): a claim whose resource would
	// take the namespace over it is not provisioned (SpendLimitReached). Set by whoever may edit
	// Namespaces, never by a namespace's own team.
	AnnotationMaxMonthlyCost = "conductor.io/max-monthly-cost"
)
