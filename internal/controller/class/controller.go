// Package class validates classes.
//
// A platform team must see a broken class before any claim uses it. This controller resolves the
// class's module at its version (fetched once into a cache), records the module's declared inputs
// and outputs in status, and checks the variables template against them: every template parses and
// refers only to claim and class, every name is a declared input, every typed value fits its
// input's type, and every required input is set by variables or variablesFrom. Ready=False with
// reason ModuleInvalid or TemplateInvalid says what is wrong; the claim controller does not
// provision from a class whose Ready is False.
package class

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/controller/shared"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// ModuleResolver reads a module's declared inputs and outputs (tfrunner.ModuleCache implements it).
type ModuleResolver interface {
	Schema(ctx context.Context, m tfrunner.Module, creds *tfrunner.SourceCredentials) (*tfrunner.ModuleSchema, error)
}

// Reconciler validates InfraClasses against their modules.
type Reconciler struct {
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
// +kubebuilder:rbac:groups=conductor.io,resources=infraclaims,verbs=get;list;watch

// Reconcile validates one class and records the outcome in its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	class := &v1alpha1.InfraClass{}
	if err := r.Get(ctx, req.NamespacedName, class); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := class.DeepCopy()
	err := r.validate(ctx, class)
	class.Status.ObservedGeneration = class.Generation
	var invalid *provision.ClassError
	var result ctrl.Result
	switch {
	case errors.As(err, &invalid):
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionReady, metav1.ConditionFalse, invalid.Reason, invalid.Message)
		r.Recorder.Eventf(class, nil, corev1.EventTypeWarning, invalid.Reason, "Validate", "%s", shared.Truncate(invalid.Message, 1024))
		err = nil
		switch invalid.Reason {
		case v1alpha1.ReasonModuleInvalid, v1alpha1.ReasonSecretNotFound, v1alpha1.ReasonSecretInvalid:
			// A module that cannot be fetched may be fetchable later (a tag pushed, a network
			// back, its credentials Secret created or fixed: Secrets are not watched).
			result.RequeueAfter = moduleRetry
		}
	case err == nil:
		shared.SetCondition(&class.Status.Conditions, class.Generation, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonValid,
			fmt.Sprintf("module %s@%s resolved; template checked against its %d inputs", class.Spec.Module.Source, class.Spec.Module.Version, len(class.Status.Inputs)))
		err = r.keepAdmission(ctx, class)
	}
	if invalid != nil {
		// Claims of a class that is not Ready are not provisioned: nothing to check at admission.
		meta.RemoveStatusCondition(&class.Status.Conditions, v1alpha1.ConditionAdmissionChecked)
		if derr := r.deleteAdmission(ctx, class.Name); !errors.As(derr, new(*notOursError)) {
			err = derr // another's object of the name is left, and nothing to retry
		}
	}
	if recheck, lerr := r.observeEndings(ctx, class, time.Now()); lerr != nil {
		err = errors.Join(err, lerr)
	} else if recheck > 0 && (result.RequeueAfter == 0 || recheck < result.RequeueAfter) {
		result.RequeueAfter = recheck
	}
	if _, perr := shared.PatchStatus(ctx, r.Client, class, before); client.IgnoreNotFound(perr) != nil {
		err = errors.Join(err, perr)
	}
	return shared.RequeueOnConflict(result, err)
}

// moduleRetry is how soon a class whose module could not be fetched is tried again.
const moduleRetry = time.Minute

// validate resolves the module and checks the template; it returns a *provision.ClassError for what the
// platform team must fix, and other errors for what a retry may fix.
func (r *Reconciler) validate(ctx context.Context, class *v1alpha1.InfraClass) error {
	module := tfrunner.Module{Source: class.Spec.Module.Source, Version: class.Spec.Module.Version}
	if _, err := tfrunner.ParseSource(module); err != nil {
		return &provision.ClassError{Reason: v1alpha1.ReasonModuleInvalid, Message: err.Error()}
	}
	if err := provision.CheckClassPolicy(class); err != nil {
		return err
	}
	if err := provision.CheckClassPrice(class); err != nil {
		return err
	}
	creds, err := provision.ReadModuleCredentials(ctx, r.Secrets, r.Namespace, class.Spec.ModuleCredentials)
	if ie := (*provision.InputError)(nil); errors.As(err, &ie) {
		return &provision.ClassError{Reason: ie.Reason, Message: ie.Message}
	} else if err != nil {
		return err
	}
	schema, err := r.Modules.Schema(ctx, module, creds)
	if err != nil {
		var re *tfrunner.RunError
		if errors.As(err, &re) {
			return &provision.ClassError{Reason: v1alpha1.ReasonModuleInvalid, Message: fmt.Sprintf("module %s@%s: %s", class.Spec.Module.Source, class.Spec.Module.Version, re.Message)}
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
	if err := provision.CheckClassTemplate(class, schema); err != nil {
		return err
	}
	return provision.CheckClassIdentities(class)
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.InfraClass{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("infraclass").
		Complete(r)
}
