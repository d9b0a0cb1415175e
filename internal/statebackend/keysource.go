package statebackend

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Data keys of the state key Secret: the passphrase runs encrypt with, and the one before it, which
// runs and the controller still decrypt with (a rotation: move passphrase to previous-passphrase,
// put a new passphrase; each state is re-encrypted at its next write).
const (
	KeyPassphrase         = "passphrase"
	KeyPreviousPassphrase = "previous-passphrase"
)

// DefaultKeyRefresh is how often a KeySource reads its Secret again (a rotation reaches new runs
// within it).
const DefaultKeyRefresh = 30 * time.Second

// KeySource is the keyring of state encryption, read from a Secret of the controller's namespace
// (KeyPassphrase, KeyPreviousPassphrase) and read again every Refresh while Run runs. Its Keyring
// method is what Store.SetKeys takes.
type KeySource struct {
	kube      kubernetes.Interface
	namespace string
	name      string
	// Refresh is how often Run reads the Secret again; NewKeySource sets DefaultKeyRefresh.
	Refresh time.Duration
	// OnError is told of a read that failed or found a Secret it cannot use (the last good keyring
	// stays in use); nil: ignored.
	OnError func(err error)

	keys    atomic.Pointer[Keyring]
	version string
}

// NewKeySource returns the key source of Secret name in namespace. Nothing is read before Load.
func NewKeySource(kube kubernetes.Interface, namespace, name string) *KeySource {
	return &KeySource{kube: kube, namespace: namespace, name: name, Refresh: DefaultKeyRefresh}
}

// Keyring returns the keyring last read (nil before the first Load).
func (k *KeySource) Keyring() *Keyring { return k.keys.Load() }

// Load reads the Secret. With create, a Secret that does not exist is created with a NewPassphrase
// (a new install; an existing Secret is never written), and created says so. It returns an error
// when the Secret cannot be read or created, or its passphrases are missing or unusable
// (NewKeyring's errors).
func (k *KeySource) Load(ctx context.Context, create bool) (created bool, err error) {
	s, err := k.kube.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && create {
		s, err = k.kube.CoreV1().Secrets(k.namespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: k.namespace, Labels: map[string]string{
				"app.kubernetes.io/managed-by": "conductor-tf", "app.kubernetes.io/component": "state-encryption"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{KeyPassphrase: []byte(NewPassphrase())},
		}, metav1.CreateOptions{})
		created = err == nil
		if apierrors.IsAlreadyExists(err) {
			s, err = k.kube.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return false, fmt.Errorf("reading the state encryption Secret %s/%s: %w", k.namespace, k.name, err)
	}
	if s.ResourceVersion != "" && s.ResourceVersion == k.version {
		return created, nil
	}
	keys, err := NewKeyring(string(s.Data[KeyPassphrase]), string(s.Data[KeyPreviousPassphrase]))
	if err != nil {
		return created, fmt.Errorf("state encryption Secret %s/%s (keys %q, %q): %w", k.namespace, k.name, KeyPassphrase, KeyPreviousPassphrase, err)
	}
	k.keys.Store(keys)
	k.version = s.ResourceVersion
	return created, nil
}

// Run reads the Secret again every Refresh until ctx ends, keeping the last good keyring when a
// read fails (told to OnError). A Secret deleted is never created again here: that would make
// every state encrypted with the old passphrase unreadable.
func (k *KeySource) Run(ctx context.Context) {
	t := time.NewTicker(k.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := k.Load(rctx, false); err != nil && k.OnError != nil && ctx.Err() == nil {
				k.OnError(err)
			}
			cancel()
		}
	}
}
