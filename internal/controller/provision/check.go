package provision

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/render"
	"github.com/conductor-tf/conductor-tf/internal/scheduler"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// A class's templates checked before any claim exists (the class controller's validation).

// CheckClassIdentities checks a class's importIdentities templates before any claim exists: each
// must parse, refer only to claim, class and resource, and render an ID unique per resource
// (render.CheckIdentity: ${resource.name} where it reads back). It returns a *ClassError, reason
// TemplateInvalid for a template that does not compile and IdentityNotUnique for one that two
// resources could render alike, listing every such address (sorted).
func CheckClassIdentities(class *v1alpha1.InfraClass) error {
	var invalid, shared []string
	for _, addr := range slices.Sorted(maps.Keys(class.Spec.ImportIdentities)) {
		tmpl := class.Spec.ImportIdentities[addr]
		raw, _ := json.Marshal(tmpl)
		if _, err := render.Compile(map[string][]byte{addr: raw}); err != nil {
			invalid = append(invalid, fmt.Sprintf("importIdentities[%s]: %v", addr, err))
			continue
		}
		if err := render.CheckIdentity(tmpl); err != nil {
			shared = append(shared, fmt.Sprintf("importIdentities[%s] %q: %v", addr, tmpl, err))
		}
	}
	switch {
	case len(invalid) > 0:
		return &ClassError{v1alpha1.ReasonTemplateInvalid, strings.Join(invalid, "; ")}
	case len(shared) > 0:
		return &ClassError{v1alpha1.ReasonIdentityNotUnique, strings.Join(shared, "; ") +
			". Two resources could get the same import ID (claim b-c of namespace a and claim c of namespace a-b, or a claim made " +
			"again after one of its name was deleted), and a create resolved with it would adopt the other's object: name the " +
			"objects after ${resource.name} in variables and importIdentities"}
	}
	return nil
}

// CheckClassTemplate checks a class's variables against the module schema before any claim exists:
// templates must parse and refer only to claim, class and resource; each name must be a declared input; typed
// values, and templates whose type is known without a claim, must fit the input's type; required
// inputs must be set; a generated password's variable must be declared ephemeral, and neither it
// nor its version variable set by variables, variablesFrom or another generated password too. It returns a *ClassError (reason
// TemplateInvalid) listing every problem.
func CheckClassTemplate(class *v1alpha1.InfraClass, schema *tfrunner.ModuleSchema) error {
	tmpl, err := render.Compile(RawVariables(class.Spec.Variables))
	if err != nil {
		return &ClassError{v1alpha1.ReasonTemplateInvalid, err.Error()}
	}
	// Evaluate with an unknown claim: static values and claim-independent templates come out known,
	// the rest as unknown values of whatever type HCL can infer.
	values := map[string]cty.Value{}
	ctx, err := render.Context(render.Claim{}, render.Class{Name: class.Name, Capabilities: class.Spec.Capabilities}, render.Resource{})
	if err != nil {
		return err
	}
	ctx.Variables["claim"] = cty.DynamicVal
	ctx.Variables["inputs"] = cty.DynamicVal
	ctx.Variables["resource"] = cty.ObjectVal(map[string]cty.Value{"name": cty.UnknownVal(cty.String)})
	for _, name := range tmpl.Names() {
		values[name] = tmpl.Partial(ctx, name)
	}
	also := secretInputNames(class.Spec.VariablesFrom)
	var passwords []string
	for _, p := range class.Spec.GeneratedPasswords {
		also, passwords = append(also, p.Variable), append(passwords, p.Variable)
		if p.VersionVariable != "" {
			values[p.VersionVariable] = cty.UnknownVal(cty.Number)
		}
	}
	var problems []string
	if p := schema.Problems(values, also); p != "" {
		problems = append(problems, p)
	}
	if p := schema.NotEphemeral(passwords); p != "" {
		problems = append(problems, p)
	}
	fromSecrets := secretInputNames(class.Spec.VariablesFrom)
	named := map[string]int{}
	for _, p := range class.Spec.GeneratedPasswords {
		for _, name := range []string{p.Variable, p.VersionVariable} {
			if named[name]++; name != "" && named[name] == 2 {
				problems = append(problems, fmt.Sprintf("variable %q is named twice in generatedPasswords", name))
			}
			if _, set := class.Spec.Variables[name]; set && name != "" {
				problems = append(problems, fmt.Sprintf("variable %q is set by generatedPasswords and by variables", name))
			}
			if slices.Contains(fromSecrets, name) && name != "" {
				problems = append(problems, fmt.Sprintf("variable %q is set by generatedPasswords and by variablesFrom", name))
			}
		}
	}
	if len(problems) > 0 {
		return &ClassError{v1alpha1.ReasonTemplateInvalid, strings.Join(problems, "; ")}
	}
	return nil
}

// CheckClassPrice checks a class's price (scheduler.CheckPrice: units above zero, amounts not
// negative, each capacity priced once) and that a class bounding spend per namespace
// (limits.maxMonthlyCostPerNamespace) has a price. It returns a *ClassError with reason
// PriceInvalid, or nil.
func CheckClassPrice(class *v1alpha1.InfraClass) error {
	if err := scheduler.CheckPrice(class.Spec.Price); err != nil {
		return &ClassError{v1alpha1.ReasonPriceInvalid, err.Error()}
	}
	if lim := class.Spec.Limits; lim != nil && lim.MaxMonthlyCostPerNamespace != nil && class.Spec.Price == nil {
		return &ClassError{v1alpha1.ReasonPriceInvalid, "limits.maxMonthlyCostPerNamespace bounds spend, and the class has no price (spec.price) to count it with"}
	}
	return nil
}

// secretInputNames are the variable names of inputs set from Secrets.
func secretInputNames(in []v1alpha1.SecretInput) []string {
	names := make([]string, len(in))
	for i, s := range in {
		names[i] = s.Name
	}
	return names
}

// ClassError is what the platform team must fix in a class (a module that does not resolve, a
// template that does not compile or fit the module's inputs): the class's Ready condition is False
// with Reason (a v1alpha1 reason) and Message, until the class changes.
type ClassError struct{ Reason, Message string }

func (e *ClassError) Error() string { return e.Message }
