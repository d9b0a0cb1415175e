package provision

// What a claim reads from other claims' outputs (spec.parametersFrom, resolved by the claim
// reconciler into status.inputs.reads) becomes part of its resource: non-sensitive values are
// offered to the class's templates as `inputs` and, for a module variable the class leaves unset,
// passed as that variable; sensitive values are passed only that second way, as a variablesFrom
// reference to the upstream's connection Secret, so that no object ever holds them.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// InputsJSON is the JSON object templates see as `inputs`: the non-sensitive values of the claim's
// status.inputs.reads by parameter; nil when the claim reads none.
func InputsJSON(claim *v1alpha1.InfraClaim) []byte {
	if claim.Status.Inputs == nil || len(claim.Status.Inputs.Reads) == 0 {
		return nil
	}
	m := map[string]json.RawMessage{}
	for _, r := range claim.Status.Inputs.Reads {
		if !r.Sensitive && r.Value != nil {
			m[r.Parameter] = r.Value.Raw
		}
	}
	b, _ := json.Marshal(m) // RawMessages that came from the API server: always valid JSON
	return b
}

// setByClass reports whether the class sets module variable name itself (variables, variablesFrom
// or a generated password).
func setByClass(class *v1alpha1.InfraClass, name string) bool {
	if _, ok := class.Spec.Variables[name]; ok {
		return true
	}
	for _, in := range class.Spec.VariablesFrom {
		if in.Name == name {
			return true
		}
	}
	for _, p := range class.Spec.GeneratedPasswords {
		if p.Variable == name || p.VersionVariable == name {
			return true
		}
	}
	return false
}

// declares reports whether the class's module declares input variable name (class status), and
// for a sensitive value, declares it sensitive: a sensitive output never reaches a variable whose
// value Terraform would show in plans or pass to outputs unmarked.
func declares(class *v1alpha1.InfraClass, name string, sensitive bool) bool {
	return slices.ContainsFunc(class.Status.Inputs, func(in v1alpha1.ModuleInput) bool { return in.Name == name && (in.Sensitive || !sensitive) })
}

// passedInputs splits the claim's reads that are passed straight to module variables: those the
// module declares (sensitive, for a sensitive read) and the class leaves unset. A sensitive read that cannot be passed so is an
// *InputError (InputNotAccepted): templates never see sensitive values, so nothing could use it.
func passedInputs(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass) (plain []v1alpha1.InputRead, sensitive []v1alpha1.InputRead, err error) {
	if claim.Status.Inputs == nil {
		return nil, nil, nil
	}
	var refused []string
	for _, r := range claim.Status.Inputs.Reads {
		passable := declares(class, r.Parameter, r.Sensitive) && !setByClass(class, r.Parameter)
		switch {
		case passable && r.Sensitive:
			sensitive = append(sensitive, r)
		case passable:
			plain = append(plain, r)
		case r.Sensitive:
			refused = append(refused, r.Parameter)
		}
	}
	if len(refused) > 0 {
		return nil, nil, &InputError{Reason: v1alpha1.ReasonInputNotAccepted, Message: fmt.Sprintf(
			"sensitive parameters %s name no sensitive module variable of class %s that the class leaves unset: a sensitive output is passed only "+
				"as such a variable (templates never see sensitive values)", strings.Join(refused, ", "), class.Name)}
	}
	return plain, sensitive, nil
}

// passInputs adds the claim's non-sensitive reads that name a module variable the class leaves
// unset to vars, the rendered variables.
func passInputs(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, vars v1alpha1.Variables) error {
	plain, _, err := passedInputs(claim, class)
	if err != nil {
		return err
	}
	for _, r := range plain {
		if r.Value != nil {
			vars[r.Parameter] = apiextensionsv1.JSON{Raw: append([]byte(nil), r.Value.Raw...)}
		}
	}
	return nil
}

// VariablesFrom is the resource's variablesFrom for the claim: the class's, then one per sensitive
// read passed to a module variable, naming the upstream's connection Secret and key. It returns
// passedInputs' *InputError.
func VariablesFrom(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass) ([]v1alpha1.SecretInput, error) {
	out := append([]v1alpha1.SecretInput(nil), class.Spec.VariablesFrom...)
	_, sensitive, err := passedInputs(claim, class)
	if err != nil {
		return nil, err
	}
	for _, r := range sensitive {
		if r.Secret != nil {
			out = append(out, v1alpha1.SecretInput{Name: r.Parameter, SecretKeyRef: *r.Secret})
		}
	}
	return out, nil
}

// ReadsFrom is the AnnotationReadsFrom value of the claim's resource: the upstream claims it
// reads, "namespace/name", sorted and comma-separated; "" when none.
func ReadsFrom(claim *v1alpha1.InfraClaim) string {
	var keys []string
	for _, p := range claim.Spec.ParametersFrom {
		keys = append(keys, p.UpstreamNamespace(claim.Namespace)+"/"+p.Claim)
	}
	slices.Sort(keys)
	return strings.Join(slices.Compact(keys), ",")
}
