package render

import (
	"errors"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestRender(t *testing.T) {
	claim := Claim{
		Name: "db", Namespace: "shop", Labels: map[string]string{"team": "a"},
		Spec: []byte(`{"resourceKind":"Database","resources":{"requests":{"storage":"25Gi"}},"parameters":{"window":"03:00","replicas":3}}`),
	}
	class := Class{Name: "fast", Capabilities: map[string]string{"engine": "mysql"}}
	ctx, err := Context(claim, class, Resource{Name: "db-1a2b3"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		reason  string
		tmpl    string // JSON
		want    cty.Value
		wantErr string
	}{
		{"string template joins claim fields", `"${claim.namespace}-${claim.name}"`, cty.StringVal("shop-db"), ""},
		{"a single interpolation keeps its type", `"${gibibytes(claim.spec.resources.requests.storage)}"`, cty.NumberIntVal(25), ""},
		{"mebibytes", `"${mebibytes(claim.spec.resources.requests.storage)}"`, cty.NumberIntVal(25 * 1024), ""},
		{"bytes", `"${bytes(\"1Ki\")}"`, cty.NumberIntVal(1024), ""},
		{"decimal quantities", `"${gibibytes(\"1.5Gi\")}"`, cty.NumberFloatVal(1.5), ""},
		{"parameters are visible", `"${claim.spec.parameters.window}"`, cty.StringVal("03:00"), ""},
		{"typed parameter stays typed", `"${claim.spec.parameters.replicas}"`, cty.NumberIntVal(3), ""},
		{"class capabilities", `"${upper(class.spec.capabilities.engine)}"`, cty.StringVal("MYSQL"), ""},
		{"labels", `"${claim.labels.team}"`, cty.StringVal("a"), ""},
		{"non-strings pass through typed", `4`, cty.NumberIntVal(4), ""},
		{"objects pass through", `{"a":true}`, cty.ObjectVal(map[string]cty.Value{"a": cty.True}), ""},
		{"templates inside objects and arrays, as in Terraform's JSON syntax", `{"name":"${claim.name}","tags":["${claim.namespace}",3,null],"size":"${gibibytes(claim.spec.resources.requests.storage)}","on":true}`,
			cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("db"), "on": cty.True, "size": cty.NumberIntVal(25),
				"tags": cty.TupleVal([]cty.Value{cty.StringVal("shop"), cty.NumberIntVal(3), cty.NullVal(cty.DynamicPseudoType)})}), ""},
		{"an escaped interpolation is literal", `{"a":"$${claim.name}"}`, cty.ObjectVal(map[string]cty.Value{"a": cty.StringVal("${claim.name}")}), ""},
		{"a missing attribute deep inside is an error", `{"a":["${claim.spec.parameters.nope}"]}`, cty.NilVal, "nope"},
		{"a missing attribute is an error", `"${claim.spec.parameters.nope}"`, cty.NilVal, "nope"},
		{"a bad quantity is an error", `"${gibibytes(\"lots\")}"`, cty.NilVal, "not a quantity"},
		// Issue 33: 1e2000000000 parses as a quantity, and converting it computed 10^2000000000.
		{"a quantity with a huge exponent is an error, not gigabytes of memory", `"${gibibytes(\"1e2000000000\")}"`, cty.NilVal, "out of range"},
		{"so is one with a tiny exponent", `"${bytes(\"1e-2000000000\")}"`, cty.NilVal, "out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			tpl, err := Compile(map[string][]byte{"v": []byte(tc.tmpl)})
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(ctx)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got["v"].RawEquals(tc.want) && !got["v"].Equals(tc.want).True() {
				t.Errorf("got %#v, want %#v", got["v"], tc.want)
			}
		})
	}
}

func TestCompileRejects(t *testing.T) {
	cases := map[string]string{
		"an unknown root variable":                         `"${var.x}"`,
		"a syntax error":                                   `"${claim.name"`,
		"a function that does not exist, even deep inside": `"${upper(nosuchfn(claim.name))}"`,
		"a provider function":                              `"${provider::aws::arn_parse(claim.name)}"`,
		"an unknown variable inside an object":             `{"a":{"b":["${var.x}"]}}`,
		"an unknown function inside an array":              `["${nosuchfn(claim.name)}"]`,
	}
	for reason, tmpl := range cases {
		t.Run(reason, func(t *testing.T) {
			_, err := Compile(map[string][]byte{"v": []byte(tmpl)})
			var re *Error
			if !errors.As(err, &re) || re.Name != "v" {
				t.Fatalf("err = %v, want *Error for v", err)
			}
		})
	}
	if _, err := Compile(map[string][]byte{"v": []byte(`"${max(1, ceil(gibibytes(claim.x)))}"`)}); err != nil {
		t.Errorf("known functions refused: %v", err)
	}
}

func TestCheck(t *testing.T) {
	inputs := []Input{
		{Name: "name", Type: cty.String, Required: true},
		{Name: "size", Type: cty.Number, Required: false},
		{Name: "password", Type: cty.String, Required: true},
	}
	cases := []struct {
		reason string
		values map[string]cty.Value
		also   []string
		want   []string // substrings, one per expected error
	}{
		{"all good", map[string]cty.Value{"name": cty.StringVal("a"), "size": cty.NumberIntVal(1)}, []string{"password"}, nil},
		{"a number string converts", map[string]cty.Value{"name": cty.StringVal("a"), "size": cty.StringVal("5")}, []string{"password"}, nil},
		{"unknown name", map[string]cty.Value{"name": cty.StringVal("a"), "colour": cty.StringVal("red")}, []string{"password"}, []string{`"colour": the module declares no such input`}},
		{"type mismatch", map[string]cty.Value{"name": cty.StringVal("a"), "size": cty.StringVal("big")}, []string{"password"}, []string{`"size": value of type string`}},
		{"missing required", map[string]cty.Value{"size": cty.NumberIntVal(1)}, nil, []string{`"name": required`, `"password": required`}},
		{"set twice", map[string]cty.Value{"name": cty.StringVal("a"), "password": cty.StringVal("x")}, []string{"password"}, []string{`"password": set twice`}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			errs := Check(tc.values, tc.also, inputs)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d", errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], w)
				}
			}
		})
	}
}
