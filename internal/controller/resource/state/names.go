package state

import (
	"context"
	"sync/atomic"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// Names answers whether a state name is taken (a state Secret or lock Lease of that suffix
// exists in the state namespace) from a metadata-only cache of that one namespace, so that naming
// a new resource's state costs no API request. Until the cache has synced it reads the API server
// (statebackend's Exists: a Secret and a Lease read). Only object names are cached, never data.
type Names struct {
	cache  cache.Cache
	synced atomic.Bool
}

// NewNames makes the cache of namespace's Secret and Lease names and adds it to mgr, started
// with the manager whether or not it leads (like the manager's own cache).
func NewNames(mgr ctrl.Manager, namespace string) (*Names, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
	})
	if err != nil {
		return nil, err
	}
	n := &Names{cache: c}
	for _, obj := range []client.Object{secretMeta(types.NamespacedName{}), leaseMeta(types.NamespacedName{})} {
		if _, err := c.GetInformer(context.Background(), obj); err != nil {
			return nil, err
		}
	}
	return n, mgr.Add(n)
}

// Start runs the cache until ctx ends and marks it synced once its informers have listed.
func (n *Names) Start(ctx context.Context) error {
	go func() {
		if n.cache.WaitForCacheSync(ctx) {
			n.synced.Store(true)
		}
	}()
	return n.cache.Start(ctx)
}

// NeedLeaderElection: the cache runs on every replica, as the manager's does.
func (n *Names) NeedLeaderElection() bool { return false }

// taken reports whether h's state Secret or lock Lease exists: from the cache once synced, else
// from the API server. nil n reads the API server.
func (n *Names) taken(ctx context.Context, h *statebackend.Handle, namespace string) (bool, error) {
	if n == nil || !n.synced.Load() {
		return h.Exists(ctx)
	}
	secret := types.NamespacedName{Namespace: namespace, Name: statebackend.SecretName(h.Workspace(), h.Suffix())}
	lease := types.NamespacedName{Namespace: namespace, Name: statebackend.LeaseName(h.Workspace(), h.Suffix())}
	for _, obj := range []*metav1.PartialObjectMetadata{secretMeta(secret), leaseMeta(lease)} {
		err := n.cache.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	return false, nil
}

func secretMeta(key types.NamespacedName) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

func leaseMeta(key types.NamespacedName) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	m.SetGroupVersionKind(coordinationv1.SchemeGroupVersion.WithKind("Lease"))
	return m
}
