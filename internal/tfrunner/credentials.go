package tfrunner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// Files a run's granted cloud identity is written to, inside its workspace, for one operation.
const (
	// identityTokenFile holds Identity.Token.
	identityTokenFile = "conductor.identity-token"
	// googleCredentialsFile holds the external-account credential configuration of
	// Identity.Google, whose credential_source is identityTokenFile.
	googleCredentialsFile = "conductor.google-credentials.json"
)

// Identity is a cloud workload identity granted to a run: a ServiceAccount token requested for the
// cloud's audience, and the variables the cloud's SDKs read to exchange it (AssumeRoleWithWebIdentity,
// Entra ID's federated credential, Google's STS). It is written into the workspace (mode 0600)
// before each operation and deleted when the operation ends, like Spec.Kubeconfig; the shared
// init never gets it.
type Identity struct {
	// Token is the ServiceAccount token (a JWT), written to the workspace's identity token file.
	Token []byte
	// Env are variables set as given (AWS_ROLE_ARN, AZURE_CLIENT_ID, ...).
	Env map[string]string
	// TokenFileEnv are variables set to the token file's absolute path
	// (AWS_WEB_IDENTITY_TOKEN_FILE, AZURE_FEDERATED_TOKEN_FILE, ARM_OIDC_TOKEN_FILE_PATH).
	TokenFileEnv []string
	// Google, when set, has a credential configuration written next to the token and named by
	// GOOGLE_APPLICATION_CREDENTIALS.
	Google *GoogleIdentity
}

// GoogleIdentity is what Google's external-account credential configuration for workload
// identity federation needs besides the token file: the format google.golang.org/api's
// externalaccount package and every Google SDK read from GOOGLE_APPLICATION_CREDENTIALS.
type GoogleIdentity struct {
	// Audience is the workload identity pool provider's full resource name
	// (//iam.googleapis.com/projects/<n>/locations/global/workloadIdentityPools/<p>/providers/<x>).
	Audience string
	// ServiceAccountEmail, when set, is impersonated with the federated token.
	ServiceAccountEmail string
}

// googleCredentialConfig is the external-account credential configuration of g, with the token read
// from tokenPath as text: JSON as Google's `gcloud iam workload-identity-pools create-cred-config`
// writes it.
func (g *GoogleIdentity) credentialConfig(tokenPath string) ([]byte, error) {
	cfg := map[string]any{
		"type":               "external_account",
		"audience":           g.Audience,
		"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
		"token_url":          "https://sts.googleapis.com/v1/token",
		"credential_source": map[string]any{
			"file":   tokenPath,
			"format": map[string]string{"type": "text"},
		},
	}
	if g.ServiceAccountEmail != "" {
		cfg["service_account_impersonation_url"] = "https://iamcredentials.googleapis.com/v1/projects/-/serviceAccounts/" +
			g.ServiceAccountEmail + ":generateAccessToken"
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// setEnv sets the identity's variables in env for a workspace in dir; nothing for a nil identity.
func (id *Identity) setEnv(env map[string]string, dir string) {
	if id == nil {
		return
	}
	maps.Copy(env, id.Env)
	token := filepath.Join(dir, identityTokenFile)
	for _, k := range id.TokenFileEnv {
		env[k] = token
	}
	if id.Google != nil {
		env["GOOGLE_APPLICATION_CREDENTIALS"] = filepath.Join(dir, googleCredentialsFile)
	}
}

// Files of SourceCredentials in an init's TMPDIR, for the init command only.
const (
	gitCredentialsFile = "conductor-git-credentials"
	sshKeyFile         = "conductor-ssh-key"
	knownHostsFile     = "conductor-known-hosts"
)

// SourceCredentials are what fetching a module needs: given to init commands only (the shared
// init of runs and the class check's fetch), never to plan, apply, destroy, import or a
// provider. Files are written into the init's own TMPDIR (mode 0600), which no other run may
// read, and deleted when the command ends.
type SourceCredentials struct {
	// RegistryTokens are TF_TOKEN_<host> variables: Terraform's and OpenTofu's convention for
	// registry credentials (the host with dots as "_" and hyphens as "__").
	RegistryTokens map[string]string
	// GitCredentials are git-credential-store lines (https://<user>:<token>@<host>[:port]), one
	// per host: git answers a host's authentication challenge from them (credential.helper store).
	GitCredentials []byte
	// SSHPrivateKey and KnownHosts are for git over SSH: ssh uses that key only and accepts only
	// the hosts known_hosts lists (StrictHostKeyChecking yes).
	SSHPrivateKey, KnownHosts []byte
}

// ErrUnsafePath is returned when a credential file's path cannot be quoted for git's shell.
var ErrUnsafePath = errors.New("path holds a single quote")

// env is what an init command gets of c, with its files in dir: the registry tokens, git's
// credential helper (GIT_CONFIG_COUNT/KEY/VALUE, the only helper: the list is reset first) and
// GIT_SSH_COMMAND. nil for a nil c.
func (c *SourceCredentials) env(dir string) (map[string]string, error) {
	if c == nil {
		return nil, nil
	}
	if strings.Contains(dir, "'") {
		return nil, fmt.Errorf("credential files in %q: %w", dir, ErrUnsafePath)
	}
	env := maps.Clone(c.RegistryTokens)
	if env == nil {
		env = map[string]string{}
	}
	if len(c.GitCredentials) > 0 {
		// credential.helper is a list: an empty value first drops the helpers of every git
		// configuration file (/etc/gitconfig's included), then ours is the only one.
		env["GIT_CONFIG_COUNT"] = "2"
		env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"] = "credential.helper", ""
		env["GIT_CONFIG_KEY_1"] = "credential.helper"
		env["GIT_CONFIG_VALUE_1"] = "store --file='" + filepath.Join(dir, gitCredentialsFile) + "'"
	}
	if len(c.SSHPrivateKey) > 0 {
		known := "/dev/null"
		if len(c.KnownHosts) > 0 {
			known = filepath.Join(dir, knownHostsFile)
		}
		env["GIT_SSH_COMMAND"] = "ssh -F /dev/null -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o BatchMode=yes -i '" +
			filepath.Join(dir, sshKeyFile) + "' -o UserKnownHostsFile='" + known + "'"
	}
	return env, nil
}

// write writes c's files into dir (mode 0600) and returns a function that deletes them.
func (c *SourceCredentials) write(dir string) (func(), error) {
	files := map[string][]byte{}
	if c != nil {
		files = map[string][]byte{gitCredentialsFile: c.GitCredentials, sshKeyFile: c.SSHPrivateKey, knownHostsFile: c.KnownHosts}
	}
	remove := func() {
		for name := range files {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
	for name, data := range files {
		if len(data) == 0 {
			continue
		}
		if err := wsfs.WriteIn(dir, name, data, 0o600); err != nil {
			remove()
			return nil, err
		}
	}
	return remove, nil
}

// Fingerprint identifies c in the keys of what a fetch with c makes and later calls reuse (the
// module cache's directories, the shared init's): a SHA-256, hex, of every token, credential line
// and key, in a fixed order; "" for nil or empty credentials. A module fetched with one set of
// credentials is thus never served to a class that brings other credentials or none: it fetches
// the module itself, and a private module it may not read stays refused.
func (c *SourceCredentials) Fingerprint() string {
	if c == nil || (len(c.RegistryTokens) == 0 && len(c.GitCredentials) == 0 && len(c.SSHPrivateKey) == 0 && len(c.KnownHosts) == 0) {
		return ""
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(c.RegistryTokens)) {
		fmt.Fprintf(h, "token %d:%s=%d:%s\n", len(k), k, len(c.RegistryTokens[k]), c.RegistryTokens[k])
	}
	for _, part := range [][]byte{c.GitCredentials, c.SSHPrivateKey, c.KnownHosts} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
