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

// CheckInputs compares spec's variables (JSON values) and the names of its sensitive and
// ephemeral variables with the module's declared inputs (render.Check, Terraform's conversion
// rules), and requires each ephemeral one to be declared `ephemeral = true`: *InputError naming
// every problem, nil when they fit.
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
	also := slices.Collect(maps.Keys(spec.SensitiveVariables))
	also = append(also, slices.Collect(maps.Keys(spec.EphemeralVariables))...)
	problems := schema.Problems(values, also)
	if p := schema.NotEphemeral(slices.Collect(maps.Keys(spec.EphemeralVariables))); p != "" {
		problems = strings.TrimPrefix(problems+"; "+p, "; ")
	}
	if problems != "" {
		return &InputError{problems}
	}
	return nil
}

// NotEphemeral names the variables among names that the module declares without
// `ephemeral = true` (a value passed there would be written into plans and the state), one
// problem each, sorted and joined by "; "; "" when there is none. A variable the module does not
// declare at all is Problems' to report.
func (s *ModuleSchema) NotEphemeral(names []string) string {
	var msgs []string
	for _, name := range slices.Sorted(slices.Values(names)) {
		if in, ok := s.Input(name); ok && !in.Ephemeral {
			msgs = append(msgs, fmt.Sprintf("variable %q gets a generated password but the module does not declare it ephemeral = true: it would be stored in plans and the state", name))
		}
	}
	return strings.Join(msgs, "; ")
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
