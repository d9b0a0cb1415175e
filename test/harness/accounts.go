package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// EditorRole is the ClusterRole config/rbac gives namespace editors over claims (named as
// controller-gen and kustomize leave it before the installer's name prefix).
const EditorRole = "infraclaim-editor-role"

// ApplyFiles creates every object in the YAML files (paths relative to the repository's root) with
// c, as `kubectl create -f` would; objects that exist already are left as they are.
func ApplyFiles(ctx context.Context, c client.Client, paths ...string) error {
	for _, p := range paths {
		data, err := os.ReadFile(filepath.Join(RepoRoot(), p))
		if err != nil {
			return err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			obj := &unstructured.Unstructured{}
			if err := obj.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: %s %s: %w", p, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// ServiceAccountConfig creates the ServiceAccount ns/name (if missing), binds it in ns to the
// ClusterRoles roles, and returns a rest.Config that authenticates as it with a token from the
// TokenRequest API (valid one hour) and nothing else of base's credentials, as a kubeconfig of a
// namespace's team would.
func ServiceAccountConfig(ctx context.Context, base *rest.Config, ns, name string, roles ...string) (*rest.Config, error) {
	kube, err := kubernetes.NewForConfig(base)
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	for _, role := range roles {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}
		if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	hour := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of %s/%s: %w", ns, name, err)
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}

// Teams hands out, per namespace, a client that acts as that namespace's "deployer"
// ServiceAccount holding only EditorRole there: what an application team may do with claims.
type Teams struct {
	base    *rest.Config
	mu      sync.Mutex
	clients map[string]client.Client
}

// NewTeams installs EditorRole (config/rbac/infraclaim_editor_role.yaml) with admin and returns
// Teams over the API server of base.
func NewTeams(ctx context.Context, admin client.Client, base *rest.Config) (*Teams, error) {
	if err := ApplyFiles(ctx, admin, "config/rbac/infraclaim_editor_role.yaml"); err != nil {
		return nil, err
	}
	return &Teams{base: base, clients: map[string]client.Client{}}, nil
}

// Client is namespace ns's team client, made (ServiceAccount, RoleBinding, token) on first use.
func (t *Teams) Client(ctx context.Context, ns string) (client.Client, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.clients[ns]; ok {
		return c, nil
	}
	cfg, err := ServiceAccountConfig(ctx, t.base, ns, "deployer", EditorRole)
	if err != nil {
		return nil, err
	}
	c, err := NewClient(cfg)
	if err != nil {
		return nil, err
	}
	// The API server's RBAC authorizer learns of the new binding through a watch: wait for it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := c.List(ctx, &v1alpha1.InfraClaimList{}, client.InNamespace(ns))
		if err == nil {
			break
		}
		if !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			return nil, fmt.Errorf("listing claims as %s's team: %w", ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.clients[ns] = c
	return c, nil
}
