package readypool

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// TestCountsLeaveConditionsAlone: the class reconciler turns the class Ready between this
// reconciler's read and its write; the write must not put the Ready=False it read back (seen in
// CI on 540e7d6: "A class that turns Ready" stayed TemplateInvalid after its fix).
func TestCountsLeaveConditionsAlone(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "fixed", Generation: 2}}
	meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonTemplateInvalid, Message: "broken", ObservedGeneration: 1})
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class).WithStatusSubresource(&v1alpha1.InfraClass{}).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			if _, ok := obj.(*v1alpha1.InfraClass); ok {
				// The class reconciler's write, after this read.
				now := &v1alpha1.InfraClass{}
				if err := c.Get(ctx, key, now); err != nil {
					return err
				}
				meta.SetStatusCondition(&now.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
					Reason: v1alpha1.ReasonValid, Message: "fixed", ObservedGeneration: 2})
				return c.Status().Update(ctx, now)
			}
			return nil
		}}).Build()
	r := &Reconciler{Client: c}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(class)}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.InfraClass{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(class), got); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("Ready = %+v: the pool's status write put back the condition it had read", meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady))
	}
}
