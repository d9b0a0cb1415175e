// Package v1alpha1 holds the conductor.io/v1alpha1 API: InfraClass, InfraClaim and InfraResource.
//
// It is the PersistentVolume pattern with Terraform modules as the provisioner: a namespaced
// InfraClaim asks for infrastructure by kind and requirements, a cluster-scoped InfraClass says how
// to provision it from a versioned module, and a cluster-scoped InfraResource is one piece of
// infrastructure. This package holds types, validation markers and condition constants only.
//
// +kubebuilder:object:generate=true
// +groupName=conductor.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "conductor.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
