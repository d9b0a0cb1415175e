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
	// PodLabels and PodAnnotations are added to the runner pods (e.g. Azure Workload Identity's
	// azure.workload.identity/use: "true", or a service mesh's opt-out); the pool's own labels
	// (app.kubernetes.io/name, app.kubernetes.io/component, conductor.io/runner-pool) win.
	// +optional
	PodLabels map[string]string `json:"podLabels,omitempty"`
	// +optional
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// Env of each runner's container; every run gets these variables too (proxies, a cloud's
	// region, a mounted credential file's path).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.name != 'POD_NAME')",message="POD_NAME is the runner's own"
	Env []corev1.EnvVar `json:"env,omitempty"`
	// RunEnv names more variables of the runner's container that runs get: those a mutating
	// webhook injects (EKS's AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, Azure Workload
	// Identity's AZURE_*). Runs get no other variable of the runner's.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	RunEnv []string `json:"runEnv,omitempty"`
	// Volumes of the runner pods, mounted into the runner's container by VolumeMounts. Runs may
	// read (never write) every path mounted here. The names token, ca, work and tmp are the
	// runner's own; hostPath volumes are refused at admission, and a projected ServiceAccount token
	// for the API server or the run protocol (a runner's own credentials) by the controller
	// (Ready False, VolumeRefused: no Deployment is made).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(v, !(v.name in ['token', 'ca', 'work', 'tmp']))",message="token, ca, work and tmp are the runner's own volumes"
	// +kubebuilder:validation:XValidation:rule="self.all(v, !has(v.hostPath))",message="runner pods mount no hostPath volume"
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// VolumeMounts mount volumes into the runner's container, read-only.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=mountPath
	VolumeMounts []RunnerVolumeMount `json:"volumeMounts,omitempty"`
	// RunReadPaths are more paths of the runner's container that runs may read: those a
	// mutating webhook mounts (EKS's /var/run/secrets/eks.amazonaws.com/serviceaccount, Azure
	// Workload Identity's /var/run/secrets/azure/tokens). Never the runner's own token, CA or
	// working space.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	RunReadPaths []RunPath `json:"runReadPaths,omitempty"`
}

// RunnerVolumeMount mounts a volume of the pool into the runner's container, read-only: runs may
// read what it holds.
type RunnerVolumeMount struct {
	// Name of a volume of spec.volumes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// MountPath is where the volume appears in the runner's container.
	MountPath RunPath `json:"mountPath"`
	// SubPath is the path within the volume to mount; empty: its root.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="subPath must be relative and not contain '..'"
	SubPath string `json:"subPath,omitempty"`
}

// RunPath is an absolute path in a runner's container that runs are granted: never the runner's
// own token, CA or working space (/var/run/conductor-tf, and /run/conductor-tf since /var/run is
// a link to /run; /work, /tmp), nor /proc (where warm providers' socket paths show), nor a
// directory holding them. The runner also refuses, resolved, a path that holds a hidden one.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=256
// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.contains(',') && !self.contains('//') && !self.contains('/./') && !self.endsWith('/.') && !self.contains('/..') && ['/var/run/conductor-tf', '/run/conductor-tf', '/work', '/tmp', '/proc'].all(r, !(r + '/').startsWith(self.endsWith('/') ? self : self + '/') && !self.startsWith(r + '/'))",message="must be absolute and plain (no //, /./ or ..), and neither hold nor lie inside /var/run/conductor-tf, /run/conductor-tf, /work, /tmp or /proc"
type RunPath string

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
