package resource

import (
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// The inputs hash follows the Secret inputs' values: the same passwords give the same hash, a
// rotated one another (else no apply would follow a rotation), and a resource without Secret
// inputs has none. (Moved here from the password spec when the password code moved to
// resource/secrets.)
func TestInputsHashFollowsSecretInputs(t *testing.T) {
	res := &v1alpha1.InfraResource{Spec: v1alpha1.InfraResourceSpec{RunInputs: v1alpha1.RunInputs{
		GeneratedPasswords: []v1alpha1.GeneratedPassword{{Variable: "master_password"}},
	}}}
	spec := func(pw string) tfrunner.Spec {
		return tfrunner.Spec{EphemeralVariables: map[string]string{"master_password": pw}}
	}
	first, again, rotated := inputsHash(res, spec("p0")), inputsHash(res, spec("p0")), inputsHash(res, spec("p1"))
	if first == "" || first != again {
		t.Fatalf("the same password: hashes %q, %q", first, again)
	}
	if rotated == first {
		t.Fatal("a rotated password leaves the inputs hash as it was: no apply would follow")
	}
	if h := inputsHash(&v1alpha1.InfraResource{}, spec("p0")); h != "" {
		t.Fatalf("no Secret inputs: hash %q, want none", h)
	}
}
