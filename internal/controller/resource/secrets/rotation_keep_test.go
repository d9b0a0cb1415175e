package secrets

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

func rotationFixture(t *testing.T) (*Keeper, *v1alpha1.InfraResource, func() *corev1.Secret) {
	res := passwordResource("db-1", v1alpha1.GeneratedPassword{Variable: "master_password"})
	r, c, _ := newTestKeeper()
	secret := func() *corev1.Secret {
		s := &corev1.Secret{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: testNamespace, Name: passwordSecretName(res)}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	return r, res, secret
}

func makePasswords(t *testing.T, r *Keeper, res *v1alpha1.InfraResource) string {
	spec := tfrunner.Spec{}
	if _, err := r.PasswordInputs(context.Background(), res, &spec, true); err != nil {
		t.Fatal(err)
	}
	return spec.EphemeralVariables["master_password"]
}

// A rotation makes the new password before any apply sends it: the one the infrastructure still
// has must stay in the Secret (issue 65 item 8: "a password rotation overwrites the only copy
// before it is applied"). Seen failing first: after the rotation no copy of the old one was left.
func TestRotationKeepsTheReplacedPassword(t *testing.T) {
	r, res, secret := rotationFixture(t)
	p0 := makePasswords(t, r, res)
	res.Annotations = map[string]string{v1alpha1.AnnotationRotatePasswords: "1"}
	p1 := makePasswords(t, r, res)
	if p1 == p0 {
		t.Fatal("the rotation kept the password")
	}
	kept := false
	for k, v := range secret().Data {
		if k != passwordKeyPrefix+"master_password" && string(v) == p0 {
			kept = true
		}
	}
	if !kept {
		t.Fatal("after the rotation, before any apply, the Secret holds no copy of the password the infrastructure has")
	}
}

// Until an apply sends the new password, the connection Secret written without a run gets the one
// the infrastructure has; a second rotation before that apply keeps the oldest; the apply that sent
// the current one removes the copy, one that sent an older one does not.
func TestRotatedPasswordUsedOnceApplied(t *testing.T) {
	ctx := context.Background()
	r, res, secret := rotationFixture(t)
	p0 := makePasswords(t, r, res)
	res.Annotations = map[string]string{v1alpha1.AnnotationRotatePasswords: "1"}
	p1 := makePasswords(t, r, res)
	if got, err := r.appliedPasswords(ctx, res); err != nil || got["master_password"] != p0 {
		t.Fatalf("applied passwords before the rotation's apply = %v, %v; want the old one", got, err)
	}
	res.Annotations[v1alpha1.AnnotationRotatePasswords] = "2"
	p2 := makePasswords(t, r, res)
	if got, _ := r.appliedPasswords(ctx, res); got["master_password"] != p0 {
		t.Fatalf("after a second rotation not applied: %v; want the first password still", got)
	}
	if err := r.PasswordsApplied(ctx, res, map[string]string{"master_password": p1}); err != nil {
		t.Fatal(err)
	}
	if string(secret().Data[previousKeyPrefix+"master_password"]) != p0 {
		t.Fatal("an apply that sent a password already replaced removed the copy of the applied one")
	}
	if err := r.PasswordsApplied(ctx, res, map[string]string{"master_password": p2}); err != nil {
		t.Fatal(err)
	}
	if _, ok := secret().Data[previousKeyPrefix+"master_password"]; ok {
		t.Fatal("the copy stayed after the apply that sent the current password")
	}
	if got, _ := r.appliedPasswords(ctx, res); got["master_password"] != p2 {
		t.Fatalf("applied passwords after the apply = %v; want the current one", got)
	}
}
