// Class validation.
//
// A platform team must see a broken class before any claim uses it. This controller resolves the
// class's module at its version (fetched once into a cache), records the module's declared inputs
// and outputs in status, and checks the variables template against them: every template parses and
// refers only to claim and class, every name is a declared input, every typed value fits its
// input's type, and every required input is set by variables or variablesFrom. Ready=False with
// reason ModuleInvalid or TemplateInvalid says what is wrong; the claim controller does not
// provision from a class whose Ready is False.
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/zclconf/go-cty/cty"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/render"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// ModuleResolver reads a module's declared inputs and outputs (tfrunner.ModuleCache implements it).
type ModuleResolver interface {
	Schema(ctx context.Context, m tfrunner.Module, creds *tfrunner.SourceCredentials) (*tfrunner.ModuleSchema, error)
}

// ClassReconciler validates InfraClasses against their modules.
type ClassReconciler struct {
	client.Client
	Recorder events.EventRecorder
	Modules  ModuleResolver
	// Secrets reads moduleCredentials Secrets (uncached: the manager's API reader), in Namespace,
	// the controller's own.
	Secrets   client.Reader
	Namespace string
}

// +kubebuilder:rbac:groups=conductor.io,resources=infraclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=conductor.io,resources=infraclasses/status,verbs=get;update;patch

// Reconcile validates one class and records the outcome in its status.
func (r *ClassReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	class := &v1alpha1.InfraClass{}
	if err := r.Get(ctx, req.NamespacedName, class); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := class.DeepCopy()
	err := r.validate(ctx, class)
	class.Status.ObservedGeneration = class.Generation
	var invalid *classError
	var result ctrl.Result
	switch {
	case errors.As(err, &invalid):
		setCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, invalid.reason, invalid.message)
		r.Recorder.Eventf(class, nil, corev1.EventTypeWarning, invalid.reason, "Validate", "%s", truncate(invalid.message, 1024))
		err = nil
		switch invalid.reason {
		case v1alpha1.ReasonModuleInvalid, v1alpha1.ReasonSecretNotFound, v1alpha1.ReasonSecretInvalid:
			// A module that cannot be fetched may be fetchable later (a tag pushed, a network
			// back, its credentials Secret created or fixed: Secrets are not watched).
			result.RequeueAfter = moduleRetry
		}
	case err == nil:
		setCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonValid,
			fmt.Sprintf("module %s@%s resolved; template checked against its %d inputs", class.Spec.Module.Source, class.Spec.Module.Version, len(class.Status.Inputs)))
	}
	if _, perr := patchStatus(ctx, r.Client, class, before); client.IgnoreNotFound(perr) != nil {
		err = errors.Join(err, perr)
	}
	return requeueOnConflict(result, err)
}

// moduleRetry is how soon a class whose module could not be fetched is tried again.
const moduleRetry = time.Minute

type classError struct{ reason, message string }

func (e *classError) Error() string { return e.message }

// validate resolves the module and checks the template; it returns a *classError for what the
// platform team must fix, and other errors for what a retry may fix.
func (r *ClassReconciler) validate(ctx context.Context, class *v1alpha1.InfraClass) error {
	module := tfrunner.Module{Source: class.Spec.Module.Source, Version: class.Spec.Module.Version}
	if _, err := tfrunner.ParseSource(module); err != nil {
		return &classError{v1alpha1.ReasonModuleInvalid, err.Error()}
	}
	creds, err := readModuleCredentials(ctx, r.Secrets, r.Namespace, class.Spec.ModuleCredentials)
	if ie := (*inputError)(nil); errors.As(err, &ie) {
		return &classError{ie.reason, ie.message}
	} else if err != nil {
		return err
	}
	schema, err := r.Modules.Schema(ctx, module, creds)
	if err != nil {
		var re *tfrunner.RunError
		if errors.As(err, &re) {
			return &classError{v1alpha1.ReasonModuleInvalid, fmt.Sprintf("module %s@%s: %s", class.Spec.Module.Source, class.Spec.Module.Version, re.Message)}
		}
		return err // not Terraform's verdict on the module (e.g. a cancelled context): retried
	}
	class.Status.Inputs, class.Status.Outputs = nil, nil
	for _, in := range schema.Inputs {
		class.Status.Inputs = append(class.Status.Inputs, v1alpha1.ModuleInput{
			Name: in.Name, Type: in.TypeExpr, Required: in.Required, Description: in.Description, Sensitive: in.Sensitive})
	}
	for _, o := range schema.Outputs {
		class.Status.Outputs = append(class.Status.Outputs, v1alpha1.ModuleOutput{Name: o.Name, Sensitive: o.Sensitive, Description: o.Description})
	}
	if err := CheckClassTemplate(class, schema); err != nil {
		return err
	}
	return CheckClassIdentities(class)
}

// CheckClassIdentities checks a class's importIdentities templates before any claim exists: each
// must parse, refer only to claim, class and resource, and render an ID unique per resource
// (render.CheckIdentity: ${resource.name} where it reads back). It returns a *classError, reason
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
		return &classError{v1alpha1.ReasonTemplateInvalid, strings.Join(invalid, "; ")}
	case len(shared) > 0:
		return &classError{v1alpha1.ReasonIdentityNotUnique, strings.Join(shared, "; ") +
			". Two resources could get the same import ID (claim b-c of namespace a and claim c of namespace a-b, or a claim made " +
			"again after one of its name was deleted), and a create resolved with it would adopt the other's object: name the " +
			"objects after ${resource.name} in variables and importIdentities"}
	}
	return nil
}

// CheckClassTemplate checks a class's variables against the module schema before any claim exists:
// templates must parse and refer only to claim, class and resource; each name must be a declared input; typed
// values, and templates whose type is known without a claim, must fit the input's type; required
// inputs must be set. It returns a *classError (reason TemplateInvalid) listing every problem.
func CheckClassTemplate(class *v1alpha1.InfraClass, schema *tfrunner.ModuleSchema) error {
	tmpl, err := render.Compile(rawVariables(class.Spec.Variables))
	if err != nil {
		return &classError{v1alpha1.ReasonTemplateInvalid, err.Error()}
	}
	// Evaluate with an unknown claim: static values and claim-independent templates come out known,
	// the rest as unknown values of whatever type HCL can infer.
	values := map[string]cty.Value{}
	ctx, err := render.Context(render.Claim{}, render.Class{Name: class.Name, Capabilities: class.Spec.Capabilities}, render.Resource{})
	if err != nil {
		return err
	}
	ctx.Variables["claim"] = cty.DynamicVal
	ctx.Variables["resource"] = cty.ObjectVal(map[string]cty.Value{"name": cty.UnknownVal(cty.String)})
	for _, name := range tmpl.Names() {
		values[name] = tmpl.Partial(ctx, name)
	}
	if problems := schema.Problems(values, secretInputNames(class.Spec.VariablesFrom)); problems != "" {
		return &classError{v1alpha1.ReasonTemplateInvalid, problems}
	}
	return nil
}

// SetupWithManager registers the controller.
func (r *ClassReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.InfraClass{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("infraclass").
		Complete(r)
}

// secretInputNames are the variable names of inputs set from Secrets.
func secretInputNames(in []v1alpha1.SecretInput) []string {
	names := make([]string, len(in))
	for i, s := range in {
		names[i] = s.Name
	}
	return names
}
