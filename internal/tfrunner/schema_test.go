package tfrunner_test

import (
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/conductor-tf/conductor-tf/internal/render"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// The typed module declares every type construct Terraform >= 1.3 accepts: optional(T) and
// optional(T, default) in objects, nested and inside lists and maps, tuples, sets and any. Its
// schema loads, and values are checked as Terraform checks them: defaults filled in, then converted.
func TestModuleSchemaTypeConstraints(t *testing.T) {
	// Seen failing before TypeConstraintWithDefaults: `Keyword "optional" is valid only as a modifier
	// for object type attributes`, which made every class over such a module ModuleInvalid.
	schema, err := tfrunner.LoadModuleSchema("../../test/lifecycle/testdata/modules/typed")
	if err != nil {
		t.Fatal(err)
	}
	settings, ok := schema.Input("settings")
	if !ok || !settings.Required || settings.Defaults == nil {
		t.Fatalf("settings: %+v", settings)
	}
	if !settings.Type.AttributeOptional("size") || settings.Type.AttributeOptional("name") {
		t.Errorf("settings' optional attributes: %s", settings.Type.GoString())
	}
	inputs := make([]render.Input, len(schema.Inputs))
	for i, in := range schema.Inputs {
		inputs[i] = render.Input{Name: in.Name, Type: in.Type, Defaults: in.Defaults, Required: in.Required}
	}
	value := func(js string) cty.Value {
		ty, err := ctyjson.ImpliedType([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		v, err := ctyjson.Unmarshal([]byte(js), ty)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name    string
		values  map[string]string
		wantErr string
	}{
		{"optional attributes left out", map[string]string{"settings": `{"name":"a"}`}, ""},
		{"a nested optional object partly set", map[string]string{"settings": `{"name":"a","backup":{"retention":30}}`}, ""},
		{"optional attributes in lists and maps", map[string]string{"settings": `{"name":"a"}`,
			"rules": `[{"port":443}]`, "limits": `{"app":{"memory":"1Gi"}}`}, ""},
		{"tuple and set", map[string]string{"settings": `{"name":"a"}`, "pair": `["b",2]`, "labels": `["x","y"]`}, ""},
		{"an optional attribute of the wrong type", map[string]string{"settings": `{"name":"a","size":"big"}`}, `.size: a number is required`},
		{"a required attribute left out", map[string]string{"settings": `{"size":1}`}, `attribute "name" is required`},
		{"a required attribute of a list's objects left out", map[string]string{"settings": `{"name":"a"}`, "rules": `[{"protocol":"udp"}]`}, `attribute "port" is required`},
		{"an attribute the type does not declare: dropped, as Terraform drops it", map[string]string{"settings": `{"name":"a","colour":"red"}`}, ""},
		{"a nested optional attribute of the wrong type", map[string]string{"settings": `{"name":"a","backup":{"enabled":"sometimes"}}`}, `.backup.enabled: a bool is required`},
	}
	for _, c := range cases {
		values := map[string]cty.Value{"path": cty.StringVal("/tmp/x")}
		for k, js := range c.values {
			values[k] = value(js)
		}
		errs := render.Check(values, nil, inputs)
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		got := strings.Join(msgs, "; ")
		switch {
		case c.wantErr == "" && got != "":
			t.Errorf("%s: %s", c.name, got)
		case c.wantErr != "" && !strings.Contains(got, c.wantErr):
			t.Errorf("%s: got %q, want an error containing %q", c.name, got, c.wantErr)
		}
	}
}
