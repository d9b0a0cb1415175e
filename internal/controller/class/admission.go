package class

// Claims checked at admission: from the class's template (which claim parameters it reads, and
// how: render.ParameterUses) and the module's variable types (status.inputs), the class keeps a
// ValidatingAdmissionPolicy and its binding, so that `kubectl apply` of a claim of the class that
// lacks a parameter the template needs, or whose value cannot convert to its variable's type, is
// refused with the reason. The checks are a subset of what rendering checks (never stricter than
// go-cty's conversions, which Terraform uses); failurePolicy Ignore lets a claim through when an
// expression cannot be evaluated, so the run's own check is the fallback, as for a class whose
// template cannot be described (the AdmissionChecked condition says so).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/render"
)

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;create;update;delete

// admissionName is the name of the class's policy and binding: conductor-class-<class>, or a
// hash of the class's name when that would be longer than a name may be.
func admissionName(class string) string {
	name := "conductor-class-" + class
	if len(name) > 253 {
		sum := sha256.Sum256([]byte(class))
		name = "conductor-class-" + hex.EncodeToString(sum[:])[:40]
	}
	return name
}

// keepAdmission makes the class's admission policy match its template and inputs (validate has
// run and the class is Ready): created or updated when there is something to check, deleted when
// not; and says so in the AdmissionChecked condition. Errors: the API server's.
func (r *Reconciler) keepAdmission(ctx context.Context, class *v1alpha1.InfraClass) error {
	vars := map[string][]byte{}
	for k, v := range class.Spec.Variables {
		vars[k] = v.Raw
	}
	tmpl, err := render.Compile(vars)
	var uses []render.ParameterUse
	if err == nil {
		uses, err = tmpl.ParameterUses()
	}
	set := func(status metav1.ConditionStatus, reason, msg string) {
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionAdmissionChecked, status, reason, msg)
	}
	validations := admissionValidations(class, uses)
	if err != nil || len(validations) == 0 {
		if derr := r.deleteAdmission(ctx, class.Name); derr != nil && !errors.As(derr, new(*notOursError)) {
			return derr
		}
		if err != nil {
			set(metav1.ConditionFalse, v1alpha1.ReasonNotExpressible, "claims of this class are checked when they render, not at admission: "+err.Error())
		} else {
			set(metav1.ConditionTrue, v1alpha1.ReasonNoParameters, "the class's template requires no claim parameter and reads none of a type to check: nothing to check at admission")
		}
		return nil
	}
	policy, binding := admissionObjects(class, validations)
	err = r.apply(ctx, class, policy)
	if err == nil {
		err = r.apply(ctx, class, binding)
	}
	var taken *notOursError
	if errors.As(err, &taken) {
		// Another's object under the name: never overwritten nor deleted; rendering checks claims.
		set(metav1.ConditionFalse, v1alpha1.ReasonAdmissionPolicyConflict, taken.Error()+"; claims of this class are checked when they render, not at admission")
		return nil
	}
	if apierrors.IsInvalid(err) {
		// The API server's CEL refused an expression: say so; rendering still checks claims.
		set(metav1.ConditionFalse, v1alpha1.ReasonNotExpressible, "the API server refused the class's ValidatingAdmissionPolicy, so claims are checked when they render: "+shared.Truncate(err.Error(), 1024))
		return r.deleteAdmission(ctx, class.Name)
	} else if err != nil {
		return err
	}
	var names []string
	for _, u := range uses {
		names = append(names, u.Name)
	}
	set(metav1.ConditionTrue, v1alpha1.ReasonParametersChecked, fmt.Sprintf(
		"ValidatingAdmissionPolicy %s checks claims' parameters %s at admission", policy.Name, strings.Join(names, ", ")))
	return nil
}

// apply creates obj, controlled by class, or updates the one there to it when it is the class's
// (ownedByClass). Errors: a *notOursError when an object of the name is another's (left as is),
// else the API server's.
func (r *Reconciler) apply(ctx context.Context, class *v1alpha1.InfraClass, obj client.Object) error {
	if err := controllerutil.SetControllerReference(class, obj, r.Scheme()); err != nil {
		return err
	}
	err := r.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	current := obj.DeepCopyObject().(client.Object)
	if err := r.Secrets.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	if !ownedByClass(current, class.Name) {
		return &notOursError{kind: kindOf(obj), name: obj.GetName()}
	}
	obj.SetResourceVersion(current.GetResourceVersion())
	return r.Update(ctx, obj)
}

// deleteAdmission deletes the class's policy and binding, if there are any and they are the
// class's (ownedByClass); another's object of the name is left, with a *notOursError.
func (r *Reconciler) deleteAdmission(ctx context.Context, class string) error {
	meta := metav1.ObjectMeta{Name: admissionName(class)}
	var errs []error
	for _, obj := range []client.Object{&admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: meta}, &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: meta}} {
		err := r.Secrets.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return err
		}
		if !ownedByClass(obj, class) {
			errs = append(errs, &notOursError{kind: kindOf(obj), name: obj.GetName()})
			continue
		}
		// Preconditioned on what was read: one replaced meanwhile by another's is not deleted.
		pre := client.Preconditions{UID: ptr.To(obj.GetUID()), ResourceVersion: ptr.To(obj.GetResourceVersion())}
		if err := r.Delete(ctx, obj, pre); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return errors.Join(errs...)
}

// ownedByClass reports whether obj is a class's: an owner reference of it names an InfraClass of
// this name (any UID: a class deleted and created again takes back what the garbage collector has
// not removed yet; a plain owner reference: what earlier versions of the controller made). An object of the name
// that someone else made is never the class's.
func ownedByClass(obj client.Object, class string) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "InfraClass" && ref.Name == class && strings.HasPrefix(ref.APIVersion, v1alpha1.GroupVersion.Group+"/") {
			return true
		}
	}
	return false
}

func kindOf(obj client.Object) string {
	if _, ok := obj.(*admissionv1.ValidatingAdmissionPolicy); ok {
		return "ValidatingAdmissionPolicy"
	}
	return "ValidatingAdmissionPolicyBinding"
}

// notOursError is an admission object of the class's name that is not the class's: the
// controller neither overwrites nor deletes it.
type notOursError struct{ kind, name string }

func (e *notOursError) Error() string {
	return fmt.Sprintf("%s %s exists and is not this class's (no owner reference to it): left as it is", e.kind, e.name)
}

// admissionObjects are the class's ValidatingAdmissionPolicy and its binding (Deny). It matches
// creates and updates of claims that name the class (spec.className) whose parameters changed (an
// update of anything else, such as the controller's finalizers, is never refused), not being
// deleted.
func admissionObjects(class *v1alpha1.InfraClass, validations []admissionv1.Validation) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	name := admissionName(class.Name)
	labels := map[string]string{"app.kubernetes.io/managed-by": "conductor-tf", "conductor.io/class": v1alpha1.LabelValue(class.Name)}
	// Only claims that name the class: a claim that names none may bind a free resource without
	// rendering any template (as a PVC binds a PV), so the default class cannot ask it for
	// parameters. A claim that names the class binds only the class's resources, which render.
	ofClass := fmt.Sprintf("has(object.spec.className) && object.spec.className == %s", strconv.Quote(class.Name))
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Ignore),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{v1alpha1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"infraclaims"}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "of-class", Expression: ofClass},
				{Name: "parameters-changed", Expression: "request.operation == 'CREATE' || has(object.spec.parameters) != has(oldObject.spec.parameters) || (has(object.spec.parameters) && object.spec.parameters != oldObject.spec.parameters)"},
				{Name: "not-deleting", Expression: "!has(object.metadata.deletionTimestamp)"},
			},
			Validations: validations,
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	return policy, binding
}

// admissionValidations are the checks of each parameter use: present when the template needs it,
// and of a shape that converts to its variable's type (or to a string, for a part of a string).
func admissionValidations(class *v1alpha1.InfraClass, uses []render.ParameterUse) []admissionv1.Validation {
	types := map[string]string{}
	for _, in := range class.Status.Inputs {
		types[in.Name] = in.Type
	}
	var out []admissionv1.Validation
	for _, u := range uses {
		key := strconv.Quote(u.Name)
		v := "object.spec.parameters[" + key + "]"
		present := "has(object.spec.parameters) && " + key + " in object.spec.parameters"
		if u.Required {
			out = append(out, admissionv1.Validation{Expression: present, Reason: ptr.To(metav1.StatusReasonInvalid),
				Message: fmt.Sprintf("spec.parameters.%s is required by class %s (its template reads it)", u.Name, class.Name)})
		}
		check, what := "", ""
		switch {
		case u.Variable != "":
			check, what = typeCheck(v, types[u.Variable])
			what += fmt.Sprintf(" (module variable %s is %s)", u.Variable, types[u.Variable])
		case u.Interpolated:
			check, what = primitive(v), "a string, number or bool (the template puts it in a string)"
		}
		if check != "" {
			out = append(out, admissionv1.Validation{Expression: "!(" + present + ") || " + check, Reason: ptr.To(metav1.StatusReasonInvalid),
				Message: fmt.Sprintf("spec.parameters.%s must be %s", u.Name, what)})
		}
	}
	return out
}

// typeCheck is a CEL test of v against a Terraform type constraint, as loose as go-cty's
// conversion (a number or bool converts to a string, a numeric string to a number, "true" and
// "false" to a bool), with what it asks for people; "" for a type it does not test (any).
func typeCheck(v, typeExpr string) (string, string) {
	// null converts to every type (the variable's default, or null, as Terraform passes it).
	switch t := strings.ReplaceAll(typeExpr, " ", ""); {
	case t == "string":
		return primitive(v), "a string"
	case t == "number":
		return fmt.Sprintf("%s || (type(%s) == string && %s.matches('^[-+]?([0-9]+\\\\.?[0-9]*|\\\\.[0-9]+)([eE][-+]?[0-9]+)?$'))", typeIn(v, "int", "uint", "double", "null_type"), v, v), "a number"
	case t == "bool":
		return fmt.Sprintf("%s || (type(%s) == string && %s in ['true', 'false', '1', '0'])", typeIn(v, "bool", "null_type"), v, v), "true or false"
	case strings.HasPrefix(t, "list("), strings.HasPrefix(t, "set("), strings.HasPrefix(t, "tuple("):
		return typeIn(v, "list", "null_type"), "a list"
	case strings.HasPrefix(t, "map("), strings.HasPrefix(t, "object("):
		return typeIn(v, "map", "null_type"), "an object"
	}
	return "", ""
}

func primitive(v string) string {
	return typeIn(v, "string", "int", "uint", "double", "bool", "null_type")
}

// typeIn tests that v's CEL type is one of types (a disjunction: a list literal of types of
// different kinds does not type-check in the API server's CEL).
func typeIn(v string, types ...string) string {
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("type(%s) == %s", v, t)
	}
	return "(" + strings.Join(parts, " || ") + ")"
}
