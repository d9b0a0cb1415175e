package provision

import (
	"errors"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// A class's generated passwords are checked against the module before any claim: each goes to a
// variable declared ephemeral, and neither it nor its version is set another way too.
func TestCheckClassTemplateGeneratedPasswords(t *testing.T) {
	schema := &tfrunner.ModuleSchema{Inputs: []tfrunner.Input{
		{Name: "name", Type: cty.String, Required: true},
		{Name: "password", Type: cty.String, Required: true, Ephemeral: true},
		{Name: "password_version", Type: cty.Number, Required: true},
		{Name: "plain", Type: cty.String},
	}}
	class := func(vars map[string]string, pw ...v1alpha1.GeneratedPassword) *v1alpha1.InfraClass {
		c := &v1alpha1.InfraClass{Spec: v1alpha1.InfraClassSpec{Variables: v1alpha1.Variables{}, RunInputs: v1alpha1.RunInputs{GeneratedPasswords: pw}}}
		for k, v := range vars {
			c.Spec.Variables[k] = apiextensionsv1.JSON{Raw: []byte(v)}
		}
		return c
	}
	ok := v1alpha1.GeneratedPassword{Variable: "password", VersionVariable: "password_version"}
	cases := []struct {
		name  string
		class *v1alpha1.InfraClass
		want  string
	}{
		{"a password and its version fill two required inputs", class(map[string]string{"name": `"${resource.name}"`}, ok), ""},
		{"without them the inputs are missing", class(map[string]string{"name": `"x"`}), `variable "password": required input is not set`},
		{"a variable not declared ephemeral", class(map[string]string{"name": `"x"`, "password": `"p"`, "password_version": `1`},
			v1alpha1.GeneratedPassword{Variable: "plain"}), `variable "plain" gets a generated password but the module does not declare it ephemeral = true`},
		{"set by variables too", class(map[string]string{"name": `"x"`, "password_version": `1`}, ok), `variable "password_version" is set by generatedPasswords and by variables`},
		{"two passwords with one version", class(map[string]string{"name": `"x"`, "plain": `"p"`},
			ok, v1alpha1.GeneratedPassword{Variable: "plain", VersionVariable: "password_version"}), `variable "password_version" is named twice in generatedPasswords`},
		{"an undeclared variable", class(map[string]string{"name": `"x"`, "password": `"p"`, "password_version": `1`},
			v1alpha1.GeneratedPassword{Variable: "nope"}), `"nope"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckClassTemplate(tc.class, schema)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected: %v", err)
				}
				return
			}
			var ce *ClassError
			if !errors.As(err, &ce) || ce.Reason != v1alpha1.ReasonTemplateInvalid || !strings.Contains(ce.Message, tc.want) {
				t.Fatalf("got %v, want TemplateInvalid with %q", err, tc.want)
			}
		})
	}
}
