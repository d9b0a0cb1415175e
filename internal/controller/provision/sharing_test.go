package provision

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func sharingClass() *v1alpha1.InfraClass {
	return &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: "pg"},
		Spec: v1alpha1.InfraClassSpec{
			ResourceKind: "Database",
			Module:       v1alpha1.ModuleSource{Source: "example.org/server", Version: "1.0.0"},
			Variables:    v1alpha1.Variables{"name": {Raw: []byte(`"${resource.name}"`)}},
			RunInputs: v1alpha1.RunInputs{VariablesFrom: []v1alpha1.SecretInput{
				{Name: "license", SecretKeyRef: v1alpha1.SecretKeySelector{Namespace: "ops", Name: "license", Key: "key"}}}},
			ImportIdentities: map[string]string{"x.this": "${resource.name}"},
			ReclaimPolicy:    v1alpha1.ReclaimDelete,
			Sharing: &v1alpha1.ClassSharing{MaxClaims: 3, PerClaim: v1alpha1.PerClaimModule{
				Module:        v1alpha1.ModuleSource{Source: "example.org/database", Version: "2.0.0"},
				Variables:     v1alpha1.Variables{"database": {Raw: []byte(`"${claim.namespace}_${claim.name}"`)}},
				SharedOutputs: []v1alpha1.SharedOutput{{Output: "endpoint", Variable: "host"}, {Output: "admin_password", Variable: "admin_password"}},
			}},
		},
	}
}

// A shared resource is rendered for no claim and bound to none; a share is the per-claim module,
// pre-bound to its claim, reading the shared resource's outputs from its connection Secret.
func TestSharedResourceAndShare(t *testing.T) {
	class := sharingClass()
	shared, err := SharedResourceFromClass(class, "conductor-system")
	if err != nil {
		t.Fatal(err)
	}
	if shared.Spec.ClaimRef != nil || shared.Spec.Module != class.Spec.Module || shared.Labels[v1alpha1.LabelSharedOf] != "pg" ||
		!strings.HasPrefix(shared.Name, "pg-shared-") || len(shared.Name) != len("pg-shared-")+6 {
		t.Errorf("shared resource %s: claimRef %v, module %v, labels %v", shared.Name, shared.Spec.ClaimRef, shared.Spec.Module, shared.Labels)
	}
	if got := shared.Spec.WriteConnectionSecretToRef; got == nil || *got != (v1alpha1.SecretReference{Namespace: "conductor-system", Name: shared.Name}) {
		t.Errorf("connection Secret %v", got)
	}
	if string(shared.Spec.Variables["name"].Raw) != `"`+shared.Name+`"` || shared.Spec.ImportIdentities["x.this"] != shared.Name {
		t.Errorf("variables %s, identities %v", shared.Spec.Variables["name"].Raw, shared.Spec.ImportIdentities)
	}

	claim := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "orders", UID: "u1"},
		Spec: v1alpha1.InfraClaimSpec{ResourceKind: "Database"}}
	share, err := ShareFromClass(claim, class, shared, 2)
	if err != nil {
		t.Fatal(err)
	}
	if share.Name != shared.Name+"-2" || share.Labels[v1alpha1.LabelShareOf] != shared.Name || share.Spec.Module != class.Spec.Sharing.PerClaim.Module ||
		share.Spec.ClaimRef == nil || share.Spec.ClaimRef.UID != "u1" || len(share.Spec.ImportIdentities) != 0 {
		t.Errorf("share %s: labels %v, module %v, claimRef %v, identities %v", share.Name, share.Labels, share.Spec.Module, share.Spec.ClaimRef, share.Spec.ImportIdentities)
	}
	if string(share.Spec.Variables["database"].Raw) != `"team-a_orders"` || len(share.Spec.Variables) != 1 {
		t.Errorf("share variables %v", share.Spec.Variables)
	}
	names := []string{}
	for _, in := range share.Spec.VariablesFrom {
		names = append(names, in.Name+"="+in.SecretKeyRef.Namespace+"/"+in.SecretKeyRef.Name+"/"+in.SecretKeyRef.Key)
	}
	want := "host=conductor-system/" + shared.Name + "/endpoint,admin_password=conductor-system/" + shared.Name + "/admin_password"
	if strings.Join(names, ",") != want {
		t.Errorf("share variablesFrom %v, want %s", names, want)
	}
	// What a render of the claim's own inputs keeps: the shared outputs.
	kept := SharedInputs(share, class)
	if len(kept) != 2 || kept[0].Name != "host" || kept[1].Name != "admin_password" {
		t.Errorf("SharedInputs = %v", kept)
	}
	if SharedInputs(shared, class) != nil {
		t.Error("a shared resource has no shared inputs")
	}
	if v := ClassFor(share, class); v.Spec.Module != class.Spec.Sharing.PerClaim.Module || ClassFor(shared, class) != class {
		t.Error("ClassFor: a share's class is the per-claim view, the shared resource's the class")
	}

	// A non-sensitive output of the shared resource (in its status) is passed as its value; a
	// render of the claim keeps it.
	shared.Status.Outputs = v1alpha1.Variables{"endpoint": {Raw: []byte(`"db.internal:5432"`)}}
	share, err = ShareFromClass(claim, class, shared, 1)
	if err != nil || string(share.Spec.Variables["host"].Raw) != `"db.internal:5432"` || len(share.Spec.VariablesFrom) != 1 || share.Spec.VariablesFrom[0].Name != "admin_password" {
		t.Errorf("a non-sensitive shared output: %v, variables %v, variablesFrom %v", err, share.Spec.Variables, share.Spec.VariablesFrom)
	}
	rendered := KeepSharedValues(v1alpha1.Variables{"database": {Raw: []byte(`"x"`)}}, share, class)
	if string(rendered["host"].Raw) != `"db.internal:5432"` || string(rendered["database"].Raw) != `"x"` {
		t.Errorf("KeepSharedValues = %v", rendered)
	}
	shared.Status.Outputs = nil

	// A shared output that the per-claim variables set too is refused.
	bad := sharingClass()
	bad.Spec.Sharing.PerClaim.Variables["host"] = apiextensionsv1.JSON{Raw: []byte(`"x"`)}
	if _, err := ShareFromClass(claim, bad, shared, 0); err == nil || !strings.Contains(err.Error(), "host") {
		t.Errorf("a shared output's variable set twice: %v", err)
	}
	// The class's own variablesFrom and generated passwords are its module's inputs, not the
	// per-claim module's: a share gets neither.
	withPassword := sharingClass()
	withPassword.Spec.GeneratedPasswords = []v1alpha1.GeneratedPassword{{Variable: "admin_password"}}
	share, err = ShareFromClass(claim, withPassword, shared, 0)
	if err != nil || len(share.Spec.GeneratedPasswords) != 0 || len(share.Spec.VariablesFrom) != 2 {
		t.Errorf("a share of a class with variablesFrom and generated passwords: %v, %v, %v", err, share.Spec.GeneratedPasswords, share.Spec.VariablesFrom)
	}
	if len(shared.Spec.VariablesFrom) != 1 || shared.Spec.VariablesFrom[0].Name != "license" {
		t.Errorf("the shared resource keeps the class's variablesFrom: %v", shared.Spec.VariablesFrom)
	}
	// A class template that reads a claim's values cannot render the shared resource.
	needy := sharingClass()
	needy.Spec.Variables["size"] = apiextensionsv1.JSON{Raw: []byte(`"${claim.spec.resources.requests.storage}"`)}
	if _, err := SharedResourceFromClass(needy, "conductor-system"); err == nil || !strings.Contains(err.Error(), "for no claim") {
		t.Errorf("a class template that needs a claim: %v", err)
	}
}
