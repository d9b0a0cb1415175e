package controller

import (
	"context"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Cache indexes.
const (
	// indexResourceKind indexes InfraResources by spec.resourceKind (binding candidates).
	indexResourceKind = "spec.resourceKind"
	// indexClaimKind indexes InfraClaims by spec.resourceKind (claims to retry when a resource frees up).
	indexClaimKind = "spec.resourceKind"
	// indexResourceClass indexes InfraResources by spec.classRef.name (resources to tell of a class's
	// new module version).
	indexResourceClass = "spec.classRef.name"
)

var indexOnce sync.Map // manager -> error

// setupIndexes registers the field indexes once per manager.
func setupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	v, _ := indexOnce.LoadOrStore(mgr, sync.OnceValue(func() error {
		idx := mgr.GetFieldIndexer()
		if err := idx.IndexField(ctx, &v1alpha1.InfraResource{}, indexResourceKind, func(o client.Object) []string {
			return []string{o.(*v1alpha1.InfraResource).Spec.ResourceKind}
		}); err != nil {
			return err
		}
		if err := idx.IndexField(ctx, &v1alpha1.InfraResource{}, indexResourceClass, func(o client.Object) []string {
			if ref := o.(*v1alpha1.InfraResource).Spec.ClassRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}); err != nil {
			return err
		}
		return idx.IndexField(ctx, &v1alpha1.InfraClaim{}, indexClaimKind, func(o client.Object) []string {
			return []string{o.(*v1alpha1.InfraClaim).Spec.ResourceKind}
		})
	}))
	return v.(func() error)()
}
