package class

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// A ValidatingAdmissionPolicy (or binding) that has the class's name but is someone else's is
// never overwritten nor deleted: the class says AdmissionPolicyConflict and claims are checked when
// they render. One the class made (an owner reference to an InfraClass of its name, even of an
// earlier UID) is updated and deleted as before.
func TestAdmissionLeavesAnotherPolicyOfTheName(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	name := admissionName("db")
	theirs := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": "security"}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{Validations: []admissionv1.Validation{{Expression: "true", Message: "theirs"}}}}
	theirBinding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "theirs"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(theirs, theirBinding).Build()
	r := &Reconciler{Client: c, Secrets: c}
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "db", UID: "class-uid", Generation: 1}}
	class.Spec.Variables = v1alpha1.Variables{"size": {Raw: []byte(`"${claim.spec.parameters.size}"`)}}
	class.Status.Inputs = []v1alpha1.ModuleInput{{Name: "size", Type: "number"}}
	ctx := context.Background()

	if err := r.keepAdmission(ctx, class); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionAdmissionChecked)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonAdmissionPolicyConflict {
		t.Fatalf("AdmissionChecked %+v, want False %s", cond, v1alpha1.ReasonAdmissionPolicyConflict)
	}
	got := &admissionv1.ValidatingAdmissionPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Validations[0].Message != "theirs" || len(got.OwnerReferences) != 0 {
		t.Fatalf("their policy was overwritten: %+v", got)
	}
	if err := r.deleteAdmission(ctx, "db"); err == nil {
		t.Fatal("deleteAdmission of another's objects returned no error")
	}
	for _, obj := range []client.Object{&admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}} {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			t.Fatalf("their %T was deleted: %v", obj, err)
		}
	}

	// The class's own, from an earlier incarnation of the class (another UID, a plain owner
	// reference): updated, then deleted.
	for _, obj := range []client.Object{got, &admissionv1.ValidatingAdmissionPolicyBinding{}} {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			t.Fatal(err)
		}
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "InfraClass", Name: "db", UID: "earlier-uid"}})
		if err := c.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.keepAdmission(ctx, class); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(class.Status.Conditions, v1alpha1.ConditionAdmissionChecked); cond.Reason != v1alpha1.ReasonParametersChecked {
		t.Fatalf("AdmissionChecked %+v, want %s", cond, v1alpha1.ReasonParametersChecked)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != class.UID || got.Spec.Validations[0].Message == "theirs" {
		t.Fatalf("the class's own policy was not updated: %+v", got)
	}
	if err := r.deleteAdmission(ctx, "db"); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, got); !apierrors.IsNotFound(err) {
		t.Fatalf("the class's own policy was not deleted: %v", err)
	}
}
