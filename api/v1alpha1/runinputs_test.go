package v1alpha1_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// Issue 66 item 5: the class's and the resource's run inputs are one embedded struct
// (RunInputs), inline, so an object stored before it reads the same fields and is written back
// with the same keys.
func TestRunInputsKeepTheirJSONPaths(t *testing.T) {
	stored := `{"resourceKind":"Store","module":{"source":"m","version":"v1"},
		"variablesFrom":[{"name":"k","secretKeyRef":{"namespace":"n","name":"s","key":"k"}}],
		"env":[{"name":"AWS_REGION","secretKeyRef":{"namespace":"n","name":"s","key":"r"}}],
		"generatedPasswords":[{"variable":"p"}],"kubernetesAccess":{"serviceAccountName":"sa"},
		"moduleCredentials":{"name":"creds"},"runnerPool":"pool"}`
	for _, spec := range []any{&v1alpha1.InfraClassSpec{}, &v1alpha1.InfraResourceSpec{}} {
		if err := json.Unmarshal([]byte(stored), spec); err != nil {
			t.Fatal(err)
		}
		in := reflect.ValueOf(spec).Elem().FieldByName("RunInputs").Interface().(v1alpha1.RunInputs)
		if len(in.VariablesFrom) != 1 || len(in.Env) != 1 || len(in.GeneratedPasswords) != 1 || in.KubernetesAccess == nil ||
			in.ModuleCredentials == nil || in.RunnerPool != "pool" {
			t.Fatalf("%T read %+v", spec, in)
		}
		b, _ := json.Marshal(spec)
		var keys map[string]json.RawMessage
		_ = json.Unmarshal(b, &keys)
		for _, k := range []string{"variablesFrom", "env", "generatedPasswords", "kubernetesAccess", "moduleCredentials", "runnerPool"} {
			if _, ok := keys[k]; !ok {
				t.Errorf("%T written without %q at the top of its spec: %s", spec, k, b)
			}
		}
		if _, ok := keys["RunInputs"]; ok {
			t.Errorf("%T written with a RunInputs key: %s", spec, b)
		}
	}
}
