package provision

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Keys of a moduleCredentials Secret besides TF_TOKEN_<host>.
const (
	keyGitCredentials = ".git-credentials"
	keySSHPrivateKey  = corev1.SSHAuthPrivateKey // ssh-privatekey, as a kubernetes.io/ssh-auth Secret has it
	keyKnownHosts     = "known_hosts"
)

// registryTokenKey is a TF_TOKEN_<host> variable name: Terraform's and OpenTofu's convention
// (the host's dots as "_", hyphens as "__"; letters, digits and underscores only).
var registryTokenKey = regexp.MustCompile(`^TF_TOKEN_[A-Za-z0-9_]+$`)

// ReadModuleCredentials reads the moduleCredentials Secret ref names in namespace (the
// controller's) into what init needs; nil, nil for a nil ref. Keys are TF_TOKEN_<host>,
// .git-credentials, ssh-privatekey and known_hosts. It returns an *InputError SecretNotFound when
// the Secret does not exist, SecretInvalid when it holds another key, none of these, or an SSH key
// without known_hosts, and the API error otherwise. The values are never copied into any object, event or log.
func ReadModuleCredentials(ctx context.Context, reader client.Reader, namespace string, ref *v1alpha1.LocalSecretReference) (*tfrunner.SourceCredentials, error) {
	if ref == nil {
		return nil, nil
	}
	s := &corev1.Secret{}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &InputError{v1alpha1.ReasonSecretNotFound, fmt.Sprintf("moduleCredentials: Secret %s/%s not found", namespace, ref.Name)}
		}
		return nil, err
	}
	c := &tfrunner.SourceCredentials{GitCredentials: s.Data[keyGitCredentials],
		SSHPrivateKey: s.Data[keySSHPrivateKey], KnownHosts: s.Data[keyKnownHosts]}
	var unknown []string
	for k, v := range s.Data {
		switch {
		case registryTokenKey.MatchString(k):
			if c.RegistryTokens == nil {
				c.RegistryTokens = map[string]string{}
			}
			c.RegistryTokens[k] = string(v)
		case k == keyGitCredentials || k == keySSHPrivateKey || k == keyKnownHosts:
		default:
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	switch {
	case len(unknown) > 0:
		return nil, &InputError{v1alpha1.ReasonSecretInvalid, fmt.Sprintf(
			"moduleCredentials: Secret %s/%s has keys %s; it may hold TF_TOKEN_<host>, %s, %s and %s only",
			namespace, ref.Name, strings.Join(unknown, ", "), keyGitCredentials, keySSHPrivateKey, keyKnownHosts)}
	case len(c.SSHPrivateKey) > 0 && len(c.KnownHosts) == 0:
		return nil, &InputError{v1alpha1.ReasonSecretInvalid, fmt.Sprintf(
			"moduleCredentials: Secret %s/%s has %s but no %s: ssh accepts only the hosts it lists", namespace, ref.Name, keySSHPrivateKey, keyKnownHosts)}
	case len(c.RegistryTokens) == 0 && len(c.GitCredentials) == 0 && len(c.SSHPrivateKey) == 0:
		return nil, &InputError{v1alpha1.ReasonSecretInvalid, fmt.Sprintf(
			"moduleCredentials: Secret %s/%s holds no credentials (TF_TOKEN_<host>, %s or %s)", namespace, ref.Name, keyGitCredentials, keySSHPrivateKey)}
	}
	return c, nil
}

// InputError is an input of a run that cannot be read or does not fit (a Secret or key missing, a
// moduleCredentials Secret of the wrong shape, a ServiceAccount without a token): no run happens,
// and the resource's Synced condition carries Reason (a v1alpha1 reason) and Message.
type InputError struct{ Reason, Message string }

func (e *InputError) Error() string { return e.Message }
