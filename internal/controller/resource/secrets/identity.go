package secrets

import (
	"context"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Default token audiences of workload identity, per cloud: what EKS's pod identity webhook, Azure
// Workload Identity's webhook and Google's workload identity pool providers expect by default.
const (
	AudienceAWS   = "sts.amazonaws.com"
	AudienceAzure = "api://AzureADTokenExchange"
	// Google's default allowed audience is the provider's resource name as an https URL.
	audienceGooglePrefix = "https:"
	// defaultAzureAuthority is Entra ID's public cloud endpoint (AZURE_AUTHORITY_HOST).
	defaultAzureAuthority = "https://login.microsoftonline.com/"
)

// WorkloadIdentityAudience is the audience a run's token is requested for: wi.Audience, or the
// cloud's default (AudienceAWS, AudienceAzure, "https:" + the Google provider's resource name).
func WorkloadIdentityAudience(wi *v1alpha1.WorkloadIdentity) string {
	switch {
	case wi.Audience != "":
		return wi.Audience
	case wi.AWS != nil:
		return AudienceAWS
	case wi.Azure != nil:
		return AudienceAzure
	case wi.Google != nil:
		return audienceGooglePrefix + wi.Google.WorkloadIdentityProvider
	}
	return ""
}

// workloadIdentity returns the cloud identity a run of res is granted, or nil when the resource
// grants none (spec.workloadIdentity absent): a token of the named ServiceAccount for the cloud's
// audience (requestToken) and the cloud's variables (identityFor). Errors as requestToken's.
func (r *Keeper) workloadIdentity(ctx context.Context, res *v1alpha1.InfraResource) (*tfrunner.Identity, error) {
	wi := res.Spec.WorkloadIdentity
	if wi == nil {
		return nil, nil
	}
	token, err := r.requestToken(ctx, "workloadIdentity", wi.ServiceAccountName, WorkloadIdentityAudience(wi), wi.ExpirationSeconds)
	if err != nil {
		return nil, err
	}
	return identityFor(wi, res.Name, []byte(token)), nil
}

// identityFor is the run's Identity for wi with token: the variables the cloud's SDKs and
// Terraform providers read (AWS: the SDK's web identity provider; Azure: azidentity's
// WorkloadIdentityCredential and azurerm's OIDC settings; Google: an external-account credential
// configuration). resource names the AWS session when wi names none.
func identityFor(wi *v1alpha1.WorkloadIdentity, resource string, token []byte) *tfrunner.Identity {
	id := &tfrunner.Identity{Token: token, Env: map[string]string{}}
	switch {
	case wi.AWS != nil:
		session := wi.AWS.SessionName
		if session == "" {
			session = "conductor-tf-" + resource
		}
		if len(session) > 64 {
			session = session[:64]
		}
		id.Env["AWS_ROLE_ARN"], id.Env["AWS_ROLE_SESSION_NAME"] = wi.AWS.RoleARN, session
		id.TokenFileEnv = []string{"AWS_WEB_IDENTITY_TOKEN_FILE"}
	case wi.Azure != nil:
		authority := wi.Azure.AuthorityHost
		if authority == "" {
			authority = defaultAzureAuthority
		}
		id.Env["AZURE_CLIENT_ID"], id.Env["AZURE_TENANT_ID"] = wi.Azure.ClientID, wi.Azure.TenantID
		id.Env["AZURE_AUTHORITY_HOST"] = authority
		id.Env["ARM_CLIENT_ID"], id.Env["ARM_TENANT_ID"], id.Env["ARM_USE_OIDC"] = wi.Azure.ClientID, wi.Azure.TenantID, "true"
		id.TokenFileEnv = []string{"AZURE_FEDERATED_TOKEN_FILE", "ARM_OIDC_TOKEN_FILE_PATH"}
	case wi.Google != nil:
		id.Google = &tfrunner.GoogleIdentity{Audience: wi.Google.WorkloadIdentityProvider,
			ServiceAccountEmail: wi.Google.ServiceAccountEmail}
	}
	return id
}
