package provision

import (
	"fmt"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/policy"
)

// PolicyRules converts a class's spec.policy to the rules a run's gate carries (nil for none).
func PolicyRules(class *v1alpha1.InfraClass) []policy.Rule {
	if class == nil || class.Spec.Policy == nil {
		return nil
	}
	rules := make([]policy.Rule, 0, len(class.Spec.Policy.Rules))
	for _, r := range class.Spec.Policy.Rules {
		rules = append(rules, policy.Rule{Name: r.Name, Expression: r.Expression, Action: policy.Action(r.Action), Message: r.Message})
	}
	return rules
}

// CheckClassPolicy compiles the class's plan rules: a *ClassError with reason PolicyInvalid that
// names each rule that does not compile (CEL's message, with line and column), or that takes the
// guard's name (policy.DestructiveChange, the rule allowDestructiveChanges lifts); nil when all
// compile.
func CheckClassPolicy(class *v1alpha1.InfraClass) error {
	rules := PolicyRules(class)
	for _, r := range rules {
		if r.Name == policy.DestructiveChange.Name {
			return &ClassError{Reason: v1alpha1.ReasonPolicyInvalid, Message: fmt.Sprintf(
				"spec.policy.rules: the name %s is the destructive-change guard's (allowDestructiveChanges lifts it); name the rule otherwise", r.Name)}
		}
	}
	if _, err := policy.Compile(rules); err != nil {
		return &ClassError{Reason: v1alpha1.ReasonPolicyInvalid, Message: "spec.policy.rules: " + err.Error()}
	}
	return nil
}
