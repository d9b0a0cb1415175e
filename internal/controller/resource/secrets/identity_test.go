package secrets

import (
	"reflect"
	"strings"
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// TestIdentityFor: each cloud's variables, files and audience, as the table in docs/identity.md
// gives them.
func TestIdentityFor(t *testing.T) {
	token := []byte("jwt")
	provider := "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/k"
	long := strings.Repeat("r", 70)
	for _, tc := range []struct {
		name     string
		wi       v1alpha1.WorkloadIdentity
		resource string
		audience string
		want     tfrunner.Identity
	}{{
		name:     "aws",
		wi:       v1alpha1.WorkloadIdentity{AWS: &v1alpha1.AWSWorkloadIdentity{RoleARN: "arn:aws:iam::123456789012:role/app"}},
		resource: long,
		audience: "sts.amazonaws.com",
		want: tfrunner.Identity{Token: token, TokenFileEnv: []string{"AWS_WEB_IDENTITY_TOKEN_FILE"}, Env: map[string]string{
			"AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/app", "AWS_ROLE_SESSION_NAME": ("conductor-tf-" + long)[:64]}},
	}, {
		name: "aws with its own audience and session",
		wi: v1alpha1.WorkloadIdentity{Audience: "minio", AWS: &v1alpha1.AWSWorkloadIdentity{
			RoleARN: "arn:aws:iam::123456789012:role/app", SessionName: "s"}},
		resource: "res",
		audience: "minio",
		want: tfrunner.Identity{Token: token, TokenFileEnv: []string{"AWS_WEB_IDENTITY_TOKEN_FILE"}, Env: map[string]string{
			"AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/app", "AWS_ROLE_SESSION_NAME": "s"}},
	}, {
		name:     "azure",
		wi:       v1alpha1.WorkloadIdentity{Azure: &v1alpha1.AzureWorkloadIdentity{ClientID: "c", TenantID: "t"}},
		audience: "api://AzureADTokenExchange",
		want: tfrunner.Identity{Token: token, TokenFileEnv: []string{"AZURE_FEDERATED_TOKEN_FILE", "ARM_OIDC_TOKEN_FILE_PATH"},
			Env: map[string]string{"AZURE_CLIENT_ID": "c", "AZURE_TENANT_ID": "t", "AZURE_AUTHORITY_HOST": "https://login.microsoftonline.com/",
				"ARM_CLIENT_ID": "c", "ARM_TENANT_ID": "t", "ARM_USE_OIDC": "true"}},
	}, {
		name: "google",
		wi: v1alpha1.WorkloadIdentity{Google: &v1alpha1.GoogleWorkloadIdentity{WorkloadIdentityProvider: provider,
			ServiceAccountEmail: "app@p.iam.gserviceaccount.com"}},
		audience: "https:" + provider,
		want: tfrunner.Identity{Token: token, Env: map[string]string{},
			Google: &tfrunner.GoogleIdentity{Audience: provider, ServiceAccountEmail: "app@p.iam.gserviceaccount.com"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WorkloadIdentityAudience(&tc.wi); got != tc.audience {
				t.Errorf("audience %q, want %q", got, tc.audience)
			}
			if got := identityFor(&tc.wi, tc.resource, token); !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("identity\n%+v\nwant\n%+v", *got, tc.want)
			}
		})
	}
}
