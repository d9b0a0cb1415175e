package render

import (
	"errors"
	"reflect"
	"testing"
)

func TestParameterUses(t *testing.T) {
	tmpl, err := Compile(map[string][]byte{
		"path":    []byte(`"${claim.spec.parameters.dir}/${claim.namespace}-${claim.name}.txt"`),
		"content": []byte(`"${claim.spec.parameters.greeting}"`),
		"mode":    []byte(`"${lookup(claim.spec.parameters, \"mode\", 644)}"`),
		"size":    []byte(`"${claim.spec.parameters.big ? 100 : 10}"`),
		"tags":    []byte(`{"team": "${claim.spec.parameters.team}", "fixed": "x"}`),
		"name":    []byte(`"${resource.name}"`),
		"deep":    []byte(`"${claim.spec.parameters.net.cidr}"`),
		"open":    []byte(`"${lookup(claim.spec.parameters, \"public\", false) && claim.spec.parameters.cidr != \"\"}"`),
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.ParameterUses()
	if err != nil {
		t.Fatal(err)
	}
	want := []ParameterUse{
		{Name: "big"},
		{Name: "cidr"},
		{Name: "dir", Required: true, Interpolated: true},
		{Name: "greeting", Required: true, Variable: "content"},
		{Name: "mode", Variable: "mode"},
		{Name: "net", Required: true},
		{Name: "public"},
		{Name: "team", Required: true, Variable: ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("uses:\n%+v\nwant\n%+v", got, want)
	}
}

func TestParameterUsesRefusesWhatItCannotDescribe(t *testing.T) {
	for _, v := range []string{
		`"${jsonencode(claim.spec.parameters)}"`,
		`"${claim.spec.parameters[claim.name]}"`,
		`"${[for k, v in claim.spec.parameters : v]}"`,
	} {
		tmpl, err := Compile(map[string][]byte{"x": []byte(v)})
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		var ne *NotExpressible
		if _, err := tmpl.ParameterUses(); !errors.As(err, &ne) || ne.Variable != "x" {
			t.Errorf("%s: %v, want NotExpressible of x", v, err)
		}
	}
}
