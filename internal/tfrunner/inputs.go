package tfrunner

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/conductor-tf/conductor-tf/internal/render"
)

// InputError stops a run whose variables do not fit the module's declared inputs; the run ends
// after init, before anything is planned. Problems joins every problem with "; ".
type InputError struct{ Problems string }

func (e *InputError) Error() string { return e.Problems }

// CheckInputs compares spec's variables (JSON values) and the names of its sensitive variables
// with the module's declared inputs (render.Check, Terraform's conversion rules): *InputError
// naming every problem, nil when they fit.
func CheckInputs(spec Spec, schema *ModuleSchema) error {
	values := make(map[string]cty.Value, len(spec.Variables))
	for _, name := range slices.Sorted(maps.Keys(spec.Variables)) {
		raw, err := json.Marshal(spec.Variables[name])
		if err != nil {
			return &InputError{fmt.Sprintf("variable %q: %v", name, err)}
		}
		ty, err := ctyjson.ImpliedType(raw)
		if err != nil {
			return &InputError{fmt.Sprintf("variable %q: %v", name, err)}
		}
		if values[name], err = ctyjson.Unmarshal(raw, ty); err != nil {
			return &InputError{fmt.Sprintf("variable %q: %v", name, err)}
		}
	}
	if problems := schema.Problems(values, slices.Collect(maps.Keys(spec.SensitiveVariables))); problems != "" {
		return &InputError{problems}
	}
	return nil
}

// Problems checks variable values, and the names also set elsewhere (from Secrets), against the
// module's declared inputs (render.Check) and joins every problem with "; "; "" when there is
// none. A nil schema declares no inputs.
func (s *ModuleSchema) Problems(values map[string]cty.Value, also []string) string {
	var inputs []render.Input
	if s != nil {
		inputs = make([]render.Input, len(s.Inputs))
		for i, in := range s.Inputs {
			inputs[i] = render.Input{Name: in.Name, Type: in.Type, Defaults: in.Defaults, Required: in.Required}
		}
	}
	errs := render.Check(values, also, inputs)
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}
