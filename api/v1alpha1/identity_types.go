package v1alpha1

// WorkloadIdentity grants a module's runs a cloud identity by workload identity federation, the
// way EKS (IRSA), AKS (Azure Workload Identity) and GKE/any cluster (Google workload identity
// federation) hand one to a pod, without a pod: for each run the controller requests a token of
// the named ServiceAccount for the cloud's audience (the TokenRequest API, serviceaccounts/token
// create), writes it into the run's workspace only (mode 0600, deleted when the run ends) and sets
// the variables the cloud's SDKs and Terraform providers read:
//
//	aws:    AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_SESSION_NAME
//	azure:  AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST,
//	        and azurerm's ARM_CLIENT_ID, ARM_TENANT_ID, ARM_OIDC_TOKEN_FILE_PATH, ARM_USE_OIDC=true
//	google: GOOGLE_APPLICATION_CREDENTIALS, naming an external-account credential configuration
//	        (written next to the token) whose credential_source is the token file
//
// The cloud trusts the cluster's service-account issuer and the token's subject
// (system:serviceaccount:<controller namespace>:<name>); docs/identity-*.md give the IAM side. A
// run never sees the controller's token nor a runner pool's.
// +kubebuilder:validation:XValidation:rule="(has(self.aws) ? 1 : 0) + (has(self.azure) ? 1 : 0) + (has(self.google) ? 1 : 0) == 1",message="name exactly one cloud: aws, azure or google"
type WorkloadIdentity struct {
	// ServiceAccountName is the ServiceAccount, in the controller's namespace, whose token each run
	// gets: the subject the cloud's trust policy names. The controller's own account and runner
	// pools' are refused as in kubernetesAccess (at admission, or ServiceAccountForbidden); a
	// missing one fails the run with ServiceAccountNotFound before anything runs.
	// +kubebuilder:validation:XValidation:rule="self != 'conductor-tf-controller-manager' && !self.startsWith('conductor-tf-runner-')",message="the controller's own ServiceAccount and runner pools' (conductor-tf-runner-*) cannot be granted to runs"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	ServiceAccountName string `json:"serviceAccountName"`
	// Audience of the token (its aud claim). Default per cloud: aws "sts.amazonaws.com", azure
	// "api://AzureADTokenExchange", google "https:" + workloadIdentityProvider (the provider's
	// default allowed audience).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Audience string `json:"audience,omitempty"`
	// ExpirationSeconds is how long each run's token is valid, in seconds: from 600 (the
	// TokenRequest API's minimum) to 86400. Default 3600. The cloud's temporary credentials are
	// the SDK's to refresh from the file, which holds the same token for the whole run.
	// +optional
	// +kubebuilder:validation:Minimum=600
	// +kubebuilder:validation:Maximum=86400
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty"`
	// AWS: the role to assume with AssumeRoleWithWebIdentity.
	// +optional
	AWS *AWSWorkloadIdentity `json:"aws,omitempty"`
	// Azure: the Entra ID application (or user-assigned managed identity) with a federated credential.
	// +optional
	Azure *AzureWorkloadIdentity `json:"azure,omitempty"`
	// Google: the workload identity pool provider, and the service account to impersonate.
	// +optional
	Google *GoogleWorkloadIdentity `json:"google,omitempty"`
}

// AWSWorkloadIdentity is an IAM role whose trust policy allows AssumeRoleWithWebIdentity from the
// cluster's OIDC provider for the ServiceAccount's subject.
type AWSWorkloadIdentity struct {
	// RoleARN is the role to assume (AWS_ROLE_ARN).
	// +kubebuilder:validation:Pattern=`^arn:[a-z0-9-]+:iam::[0-9]{12}:role/.+$`
	// +kubebuilder:validation:MaxLength=2048
	RoleARN string `json:"roleARN"`
	// SessionName is AWS_ROLE_SESSION_NAME, which CloudTrail records. Default: "conductor-tf-" and
	// the resource's name, cut to 64 characters.
	// +optional
	// +kubebuilder:validation:Pattern=`^[\w+=,.@-]{2,64}$`
	SessionName string `json:"sessionName,omitempty"`
}

// AzureWorkloadIdentity is an Entra ID application or user-assigned managed identity with a
// federated identity credential for the cluster's issuer and the ServiceAccount's subject.
type AzureWorkloadIdentity struct {
	// ClientID of the application or managed identity (AZURE_CLIENT_ID, ARM_CLIENT_ID).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ClientID string `json:"clientID"`
	// TenantID of the directory (AZURE_TENANT_ID, ARM_TENANT_ID).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	TenantID string `json:"tenantID"`
	// AuthorityHost is AZURE_AUTHORITY_HOST; default https://login.microsoftonline.com/.
	// +optional
	// +kubebuilder:validation:Pattern=`^https://`
	AuthorityHost string `json:"authorityHost,omitempty"`
}

// GoogleWorkloadIdentity is a workload identity pool provider that trusts the cluster's issuer.
type GoogleWorkloadIdentity struct {
	// WorkloadIdentityProvider is the provider's full resource name:
	// //iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<pool>/providers/<provider>.
	// +kubebuilder:validation:Pattern=`^//iam\.googleapis\.com/projects/[0-9]+/locations/global/workloadIdentityPools/[a-z0-9-]+/providers/[a-z0-9-]+$`
	WorkloadIdentityProvider string `json:"workloadIdentityProvider"`
	// ServiceAccountEmail, when set, is impersonated with the federated token (the pool's
	// principal needs roles/iam.workloadIdentityUser on it); empty: the federated identity acts
	// directly (direct resource access).
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+@[a-z0-9.-]+\.iam\.gserviceaccount\.com$`
	ServiceAccountEmail string `json:"serviceAccountEmail,omitempty"`
}
