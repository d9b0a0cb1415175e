package shared

import (
	"context"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Cache indexes.
const (
	// IndexResourceKind indexes InfraResources by spec.resourceKind (binding candidates).
	IndexResourceKind = "spec.resourceKind"
	// IndexClaimKind indexes InfraClaims by spec.resourceKind (claims to retry when a resource frees up).
	IndexClaimKind = "spec.resourceKind"
	// IndexResourceClass indexes InfraResources by spec.classRef.name (resources to tell of a class's
	// new module version).
	IndexResourceClass = "spec.classRef.name"
)

var indexOnce sync.Map // manager -> error

// SetupIndexes registers the field indexes once per manager.
func SetupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	v, _ := indexOnce.LoadOrStore(mgr, sync.OnceValue(func() error {
		idx := mgr.GetFieldIndexer()
		if err := idx.IndexField(ctx, &v1alpha1.InfraResource{}, IndexResourceKind, func(o client.Object) []string {
			return []string{o.(*v1alpha1.InfraResource).Spec.ResourceKind}
		}); err != nil {
			return err
		}
		if err := idx.IndexField(ctx, &v1alpha1.InfraResource{}, IndexResourceClass, func(o client.Object) []string {
			if ref := o.(*v1alpha1.InfraResource).Spec.ClassRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}); err != nil {
			return err
		}
		return idx.IndexField(ctx, &v1alpha1.InfraClaim{}, IndexClaimKind, func(o client.Object) []string {
			return []string{o.(*v1alpha1.InfraClaim).Spec.ResourceKind}
		})
	}))
	return v.(func() error)()
}
