package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InfraRunnerPoolSpec is a pool of runner pods: the manager keeps a Deployment of `conductor-tf
// runner` in its own namespace for it, and the runs of classes and resources that name the pool
// (spec.runnerPool) go to its runners instead of the manager's in-process pool.
type InfraRunnerPoolSpec struct {
	// Replicas is the number of runner pods.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// Concurrency is the number of runs each runner executes at once.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	Concurrency int32 `json:"concurrency,omitempty"`
	// Image of the runners; the manager's own image (its --runner-image) when empty.
	// +optional
	Image string `json:"image,omitempty"`
	// ServiceAccountName is the ServiceAccount of the runner pods, in the manager's namespace;
	// when empty, the manager creates conductor-tf-runner-<pool> for the pool. Each pool should
	// have its own: the manager serves a pool only to runners of its ServiceAccount. Runners never mount its Kubernetes API token: it serves cloud
	// workload identity (e.g. IRSA, GKE Workload Identity) and the run protocol's projected token,
	// which the manager accepts from this ServiceAccount only.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// Resources of each runner's container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// NodeSelector and Tolerations place the runner pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
}

// InfraRunnerPoolStatus is what the manager sees of the pool.
type InfraRunnerPoolStatus struct {
	// ReadyReplicas is the Deployment's ready runner pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// ConnectedRunners is the number of runners connected to the manager's run protocol now.
	// +optional
	ConnectedRunners int32 `json:"connectedRunners,omitempty"`
	// ObservedGeneration is the generation the Deployment was last made for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when at least one runner is connected.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// InfraRunnerPool is a pool of runner pods that run Terraform outside the manager's pod: isolated
// from the manager's credentials and from each other's runs, placed and sized by the platform
// team, and spread across the cluster's nodes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=irp,categories=conductor
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Concurrency",type=integer,JSONPath=`.spec.concurrency`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Connected",type=integer,JSONPath=`.status.connectedRunners`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InfraRunnerPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InfraRunnerPoolSpec   `json:"spec,omitempty"`
	Status InfraRunnerPoolStatus `json:"status,omitempty"`
}

// InfraRunnerPoolList is a list of InfraRunnerPools.
//
// +kubebuilder:object:root=true
type InfraRunnerPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InfraRunnerPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InfraRunnerPool{}, &InfraRunnerPoolList{})
}
