package v1alpha1

// RunInputs are what every run of a resource is given besides its rendered variables: sensitive
// inputs and environment read from Secrets at run time, passwords the controller generates, the
// Kubernetes and cloud credentials it may have, what fetching a private module needs, and where it
// runs. A class sets them and provisioning copies them whole into each resource it makes
// (InfraClassSpec and InfraResourceSpec embed this struct inline, so both kinds keep the same
// fields at the same JSON paths as before it existed: stored objects read unchanged).
type RunInputs struct {
	// VariablesFrom are sensitive input variables read from Secrets at run time.
	// +optional
	// +listType=map
	// +listMapKey=name
	VariablesFrom []SecretInput `json:"variablesFrom,omitempty"`

	// Env are environment variables of every run (provider credentials), read from Secrets at run
	// time.
	// +optional
	// +listType=map
	// +listMapKey=name
	Env []SecretInput `json:"env,omitempty"`

	// GeneratedPasswords are passwords the controller generates for each resource, keeps in the
	// Secret tfpassword-<state Secret's name> in the controller's namespace, and passes to the
	// module's ephemeral variables only (see GeneratedPassword): never in state or plans, written to
	// the claim's connection Secret. The annotation conductor.io/rotate-passwords on a resource asks
	// for new ones. Reclaim Delete deletes that Secret with the state; Retain keeps it, labelled as
	// the state is.
	// +optional
	// +listType=map
	// +listMapKey=variable
	// +kubebuilder:validation:MaxItems=16
	GeneratedPasswords []GeneratedPassword `json:"generatedPasswords,omitempty"`

	// KubernetesAccess grants the runs a ServiceAccount's Kubernetes credentials (for modules that
	// manage Kubernetes objects). Absent: runs get no Kubernetes credentials at all.
	// +optional
	KubernetesAccess *KubernetesAccess `json:"kubernetesAccess,omitempty"`

	// WorkloadIdentity grants the runs a cloud identity (AWS, Azure or Google workload identity
	// federation) through a ServiceAccount token requested per run. Absent: runs get no cloud
	// identity but what env gives.
	// +optional
	WorkloadIdentity *WorkloadIdentity `json:"workloadIdentity,omitempty"`

	// ModuleCredentials names a Secret, in the controller's namespace, with what fetching a
	// private module needs; the class check and every init use it, no plan, apply, destroy or
	// import sees it. Keys: TF_TOKEN_<host> (a registry token, Terraform's convention: the host
	// with dots as "_" and hyphens as "__"), .git-credentials (git-credential-store lines,
	// https://<user>:<token>@<host>), ssh-privatekey and known_hosts (git over SSH, as a
	// kubernetes.io/ssh-auth Secret has them). Read at every fetch: a rotated token is used by the
	// next init.
	// +optional
	ModuleCredentials *LocalSecretReference `json:"moduleCredentials,omitempty"`

	// RunnerPool names the InfraRunnerPool whose runner pods run the resource; empty: the
	// manager's in-process pool.
	// +optional
	RunnerPool string `json:"runnerPool,omitempty"`
}
