package v1alpha1

import "strconv"

// Shared resources (issue 68, resources-claims-classes.md: "Depending on the resource, multiple
// claims can be bound to the same resource"). A class with spec.sharing provisions one shared
// resource (the class's module: a database server, an object store) for up to maxClaims claims,
// and for each claim a share: a resource of the class's per-claim module (a database and a user,
// a bucket and its keys), bound to that claim alone, whose outputs are that claim's connection
// Secret and whose reclaim runs when that claim is released. The shared resource is reclaimed
// when its last share is gone, as a ReadWriteMany volume outlives each of the claims that mount it.

// ClassSharing lets several claims share one resource of a class (spec.sharing).
type ClassSharing struct {
	// MaxClaims is how many claims one shared resource holds: the number of its places. A claim
	// that finds every shared resource of the class full gets a new one.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxClaims int32 `json:"maxClaims"`
	// PerClaim is the module each claim gets inside the shared resource.
	PerClaim PerClaimModule `json:"perClaim"`
}

// PerClaimModule is what a sharing class provisions for each claim: a module whose inputs include
// the shared resource's outputs and whose outputs are the claim's alone.
type PerClaimModule struct {
	// Module is the per-claim module, pinned as a class's module is.
	Module ModuleSource `json:"module"`
	// Variables are the per-claim module's input variables, templates rendered against the claim
	// as a class's variables are (claim, class, resource: resource.name is the share's name).
	// +optional
	Variables Variables `json:"variables,omitempty"`
	// SharedOutputs are outputs of the shared resource passed to the per-claim module as input
	// variables, read at run time from the shared resource's connection Secret (a sensitive one is
	// never copied into any object). The per-claim module must declare them.
	// +optional
	// +listType=map
	// +listMapKey=variable
	// +kubebuilder:validation:MaxItems=32
	SharedOutputs []SharedOutput `json:"sharedOutputs,omitempty"`
}

// SharedOutput is one output of the shared resource a share reads.
type SharedOutput struct {
	// Output is the name of an output of the class's module (the shared resource's).
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=128
	Output string `json:"output"`
	// Variable is the per-claim module's input variable it is passed as.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=128
	Variable string `json:"variable"`
}

const (
	// LabelSharedOf marks a shared resource: the class whose claims share it (LabelValue of the
	// class's name). A shared resource names no claim and is never bound to one.
	LabelSharedOf = "conductor.io/shared-of"
	// LabelShareOf marks a share: the shared resource it is a place of. A share is named
	// <shared>-<place>, place 0 to maxClaims-1, so that the API server's unique names make a
	// place taken twice impossible.
	LabelShareOf = "conductor.io/share-of"
	// AnnotationSharedJoined is the time (RFC 3339) a claim last took a place of a shared
	// resource, written with the resourceVersion the claim chose it by before its share is made:
	// a shared resource is deleted only with the resourceVersion that showed it without shares,
	// and not within the grace after a join, so a share is never made of a deleted one.
	AnnotationSharedJoined = "conductor.io/shared-joined"

	// ReasonWaitingForShared: the claim's share waits for its shared resource to be Available
	// (its outputs are the share's inputs).
	ReasonWaitingForShared = "WaitingForSharedResource"
	// ReasonSharedReclaimed: a shared resource whose last share is gone is deleted (its reclaim
	// policy applies).
	ReasonSharedReclaimed = "SharedResourceReclaimed"
	// ReasonSharedOutputsChanged: a non-sensitive output of a share's shared resource changed, and
	// the share holds the new value now (its next plan applies it).
	ReasonSharedOutputsChanged = "SharedOutputsChanged"
	// ReasonSharedInUse: deleting a shared resource waits while shares of it exist.
	ReasonSharedInUse = "SharedResourceInUse"
)

// SharedPlace is the name of place n of shared resource shared: the share that takes it.
func SharedPlace(shared string, n int) string {
	return shared + "-" + strconv.Itoa(n)
}
