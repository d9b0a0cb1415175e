package shared

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func TestPatchStatusWritesOnlyAChangedStatus(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	writes := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(class).WithObjects(class).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		}}).Build()
	got := &v1alpha1.InfraClass{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(class), got); err != nil {
		t.Fatal(err)
	}

	before := got.DeepCopy()
	if wrote, err := PatchStatus(ctx, c, got, before); err != nil || wrote || writes != 0 {
		t.Errorf("unchanged: wrote=%v err=%v requests=%d; want no request", wrote, err, writes)
	}
	got.Annotations = map[string]string{"a": "b"}
	if wrote, err := PatchStatus(ctx, c, got, before); err != nil || wrote || writes != 0 {
		t.Errorf("only metadata changed: wrote=%v err=%v requests=%d; want no request", wrote, err, writes)
	}
	got.Status.ObservedGeneration = 3
	if wrote, err := PatchStatus(ctx, c, got, before); err != nil || !wrote || writes != 1 {
		t.Errorf("status changed: wrote=%v err=%v requests=%d; want one", wrote, err, writes)
	}
	stored := &v1alpha1.InfraClass{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(class), stored); err != nil || stored.Status.ObservedGeneration != 3 || stored.Annotations["a"] != "" {
		t.Errorf("stored %+v (annotations %v), err %v; want the status written and nothing else", stored.Status, stored.Annotations, err)
	}
}
