package class

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/render"
)

// TestAdmissionValidations evaluates the class's checks, as the API server would, on parameters
// decoded from JSON: what go-cty would convert passes, the rest is refused with its message.
func TestAdmissionValidations(t *testing.T) {
	class := &v1alpha1.InfraClass{}
	class.Name = "files"
	class.Status.Inputs = []v1alpha1.ModuleInput{{Name: "mode", Type: "number"}, {Name: "on", Type: "bool"}, {Name: "tags", Type: "map(string)"}}
	uses := []render.ParameterUse{{Name: "dir", Required: true, Interpolated: true}, {Name: "mode", Variable: "mode"},
		{Name: "on", Variable: "on"}, {Name: "tags", Variable: "tags"}}
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	refused := func(params map[string]any) []string {
		var msgs []string
		for _, v := range admissionValidations(class, uses) {
			ast, iss := env.Compile(v.Expression)
			if iss.Err() != nil {
				t.Fatalf("%s: %v", v.Expression, iss.Err())
			}
			prg, _ := env.Program(ast)
			out, _, err := prg.Eval(map[string]any{"object": map[string]any{"spec": map[string]any{"parameters": params}}})
			if err != nil {
				t.Fatalf("%s: %v", v.Expression, err)
			}
			if out.Value() != true {
				msgs = append(msgs, v.Message)
			}
		}
		return msgs
	}
	for _, tc := range []struct {
		params map[string]any
		want   string // a refusal's message, "" when accepted
	}{
		{map[string]any{"dir": "/tmp"}, ""},
		{map[string]any{"dir": float64(7), "mode": "600", "on": "true", "tags": map[string]any{"a": "b"}}, ""},
		{map[string]any{"dir": "/tmp", "mode": 1.5e3, "on": true}, ""},
		{map[string]any{"dir": "/tmp", "mode": ".5", "on": "1", "tags": nil}, ""},
		{map[string]any{"dir": "/tmp", "mode": "+5", "on": "0"}, ""},
		{map[string]any{"dir": "/tmp", "mode": "5.", "on": nil}, ""},
		{map[string]any{}, "spec.parameters.dir is required by class files"},
		{map[string]any{"dir": []any{"a"}}, "spec.parameters.dir must be a string, number or bool"},
		{map[string]any{"dir": "/tmp", "mode": "rw"}, "spec.parameters.mode must be a number (module variable mode is number)"},
		{map[string]any{"dir": "/tmp", "on": "yes"}, "spec.parameters.on must be true or false"},
		{map[string]any{"dir": "/tmp", "tags": []any{"a"}}, "spec.parameters.tags must be an object"},
	} {
		got := strings.Join(refused(tc.params), "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v: refused %q, want %q", tc.params, got, tc.want)
		}
	}
}
