package provision

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// TestReadModuleCredentials: the keys a moduleCredentials Secret may hold, and the reason for each
// Secret that cannot be used.
func TestReadModuleCredentials(t *testing.T) {
	secret := func(name string, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "conductor-system", Name: name}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	c := fake.NewClientBuilder().WithObjects(
		secret("ok", map[string]string{"TF_TOKEN_registry_example_org": "t", ".git-credentials": "https://u:p@git.example.org\n"}),
		secret("typo", map[string]string{"TF_TOKEN": "t", "password": "p"}),
		secret("empty", nil),
		secret("ssh-unpinned", map[string]string{"ssh-privatekey": "k"}),
		secret("ssh", map[string]string{"ssh-privatekey": "k", "known_hosts": "git.example.org ssh-ed25519 AAAA"}),
	).Build()
	read := func(name string) error {
		_, err := ReadModuleCredentials(context.Background(), c, "conductor-system", &v1alpha1.LocalSecretReference{Name: name})
		return err
	}
	for name, reason := range map[string]string{
		"ok": "", "ssh": "", "typo": v1alpha1.ReasonSecretInvalid, "empty": v1alpha1.ReasonSecretInvalid,
		"ssh-unpinned": v1alpha1.ReasonSecretInvalid, "missing": v1alpha1.ReasonSecretNotFound,
	} {
		err := read(name)
		var ie *InputError
		switch {
		case reason == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case reason != "" && (!errors.As(err, &ie) || ie.Reason != reason):
			t.Errorf("%s: %v, want %s", name, err, reason)
		}
	}
	creds, _ := ReadModuleCredentials(context.Background(), c, "conductor-system", &v1alpha1.LocalSecretReference{Name: "ok"})
	if creds.RegistryTokens["TF_TOKEN_registry_example_org"] != "t" || string(creds.GitCredentials) == "" {
		t.Fatalf("credentials %+v", creds)
	}
	if got, err := ReadModuleCredentials(context.Background(), c, "conductor-system", nil); got != nil || err != nil {
		t.Fatalf("no reference: %v %v", got, err)
	}
}
