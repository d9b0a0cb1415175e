package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/metrics"
	"github.com/conductor-tf/conductor-tf/internal/render"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Runs is what the resource controller needs of the runner pool (tfrunner.Pool implements it).
type Runs interface {
	Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error)
	Destroy(ctx context.Context, key string, spec tfrunner.Spec) error
	Forget(key string)
	// Busy reports whether a run of key is waiting or running: its lock is alive.
	Busy(key string) bool
	// ErroredState returns the state a run of key left because it could not save it, if any;
	// ClearErroredState forgets it once saved.
	ErroredState(key string) ([]byte, bool)
	ClearErroredState(key string)
	// DriftCheck plans key's infrastructure read-only.
	DriftCheck(ctx context.Context, key string, spec tfrunner.Spec) (*tfrunner.StreamResult, error)
}

// Run results recorded in status.lastRun.result.
const (
	RunRunning   = "Running"
	RunSucceeded = "Succeeded"
	RunFailed    = "Failed"
	// RunInvalid: the run was refused before planning (variables do not fit the module); it is not
	// retried until the spec changes.
	RunInvalid = "Invalid"
	// RunWaitingForApproval: the plan would destroy or replace imported objects; it is applied only
	// once the approve-replace annotation names its plan id.
	RunWaitingForApproval = "WaitingForApproval"
)

// Import results recorded in status.imports.
const (
	ImportImported       = "Imported"
	ImportAlreadyInState = "AlreadyInState"
	ImportFailed         = "Failed"
)

// DefaultSyncInterval is how often an unchanged resource is planned again to detect drift.
const DefaultSyncInterval = 10 * time.Minute

// stateRetry is how soon a resource whose state stops its runs (not saved, missing, a failed
// restore) is tried again.
const stateRetry = 10 * time.Second

// secretRetry is how soon a resource whose Secret input is missing is tried again.
const secretRetry = 30 * time.Second

// inputError is an input that cannot be read or does not fit: no run happens.
type inputError struct{ reason, message string }

func (e *inputError) Error() string { return e.message }

// needsRun decides whether the resource's infrastructure must be planned now: a new generation, no
// run yet, a failed or interrupted run, or a successful one older than the sync interval. A run
// refused as Invalid waits for a new generation.
func needsRun(res *v1alpha1.InfraResource, now time.Time, interval time.Duration) (bool, time.Duration) {
	last := res.Status.LastRun
	switch {
	case last == nil, last.Generation != res.Generation:
		return true, 0
	case last.Result == RunInvalid:
		return false, 0
	case last.Result == RunWaitingForApproval:
		return approved(res), 0
	case last.Result != RunSucceeded:
		return true, 0
	case last.CompletionTime == nil:
		return true, 0
	}
	if age := now.Sub(last.CompletionTime.Time); age < interval {
		return false, interval - age
	}
	return true, 0
}

// tenant is who a resource's runs are for, for the pool's fair share: the bound claim's namespace,
// or "" for a static resource.
func tenant(res *v1alpha1.InfraResource) string {
	if res.Spec.ClaimRef != nil {
		return res.Spec.ClaimRef.Namespace
	}
	return ""
}

// suffix is the state Secret suffix of a resource: the one recorded in status.state.secretName when
// its state name was chosen (chooseStateName), or "" for a resource that never had one.
func suffix(res *v1alpha1.InfraResource) string {
	if res.Status.State == nil {
		return ""
	}
	return statebackend.SuffixOf(res.Status.State.SecretName)
}

// runSpec assembles what a run needs: the module, the backend, the rendered variables, the
// Secret inputs read now (never stored), and the Kubernetes credentials the resource grants its
// runs (kubernetesAccess), requested now. It returns an *inputError when a Secret or key is
// missing or the ServiceAccount gets no token.
func (r *ResourceReconciler) runSpec(ctx context.Context, res *v1alpha1.InfraResource) (tfrunner.Spec, error) {
	spec := tfrunner.Spec{
		Tenant:             tenant(res),
		RunnerPool:         res.Spec.RunnerPool,
		Module:             tfrunner.Module{Source: res.Spec.Module.Source, Version: res.Spec.Module.Version},
		Variables:          map[string]any{},
		SensitiveVariables: map[string]string{},
		Env:                map[string]string{},
	}
	for name, v := range res.Spec.Variables {
		spec.Variables[name] = json.RawMessage(v.Raw)
	}
	if err := r.readSecretInputs(ctx, res, &spec); err != nil {
		return spec, err
	}
	kubeconfig, err := r.kubernetesAccess(ctx, res)
	spec.Kubeconfig = kubeconfig
	return spec, err
}

// readSecretInputs reads the resource's variablesFrom into spec.SensitiveVariables and its env into
// spec.Env, now, from the API server; an *inputError when a Secret or key is missing.
func (r *ResourceReconciler) readSecretInputs(ctx context.Context, res *v1alpha1.InfraResource, spec *tfrunner.Spec) error {
	for _, in := range res.Spec.VariablesFrom {
		v, err := r.secretValue(ctx, in)
		if err != nil {
			return err
		}
		spec.SensitiveVariables[in.Name] = v
	}
	for _, in := range res.Spec.Env {
		v, err := r.secretValue(ctx, in)
		if err != nil {
			return err
		}
		spec.Env[in.Name] = v
	}
	return nil
}

func (r *ResourceReconciler) secretValue(ctx context.Context, in v1alpha1.SecretInput) (string, error) {
	ref := in.SecretKeyRef
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &inputError{v1alpha1.ReasonSecretNotFound, fmt.Sprintf("%s: Secret %s/%s not found", in.Name, ref.Namespace, ref.Name)}
		}
		return "", err
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		return "", &inputError{v1alpha1.ReasonSecretNotFound, fmt.Sprintf("%s: Secret %s/%s has no key %q", in.Name, ref.Namespace, ref.Name, ref.Key)}
	}
	return string(v), nil
}

// checkVariables compares the resource's variables with the module's declared inputs.
func checkVariables(res *v1alpha1.InfraResource, schema *tfrunner.ModuleSchema) error {
	values := make(map[string]cty.Value, len(res.Spec.Variables))
	for name, v := range res.Spec.Variables {
		ty, err := ctyjson.ImpliedType(v.Raw)
		if err != nil {
			return &inputError{v1alpha1.ReasonInvalidVariables, fmt.Sprintf("variable %q: %v", name, err)}
		}
		val, err := ctyjson.Unmarshal(v.Raw, ty)
		if err != nil {
			return &inputError{v1alpha1.ReasonInvalidVariables, fmt.Sprintf("variable %q: %v", name, err)}
		}
		values[name] = val
	}
	if problems := inputProblems(values, res.Spec.VariablesFrom, schema); problems != "" {
		return &inputError{v1alpha1.ReasonInvalidVariables, problems}
	}
	return nil
}

// inputProblems checks variable values, and the names set from Secrets, against the module's
// declared inputs (render.Check) and joins every problem with "; "; "" when there is none.
func inputProblems(values map[string]cty.Value, fromSecrets []v1alpha1.SecretInput, schema *tfrunner.ModuleSchema) string {
	names := make([]string, len(fromSecrets))
	for i, in := range fromSecrets {
		names[i] = in.Name
	}
	errs := render.Check(values, names, moduleInputs(schema))
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

func moduleInputs(schema *tfrunner.ModuleSchema) []render.Input {
	if schema == nil {
		return nil
	}
	out := make([]render.Input, len(schema.Inputs))
	for i, in := range schema.Inputs {
		out[i] = render.Input{Name: in.Name, Type: in.Type, Defaults: in.Defaults, Required: in.Required}
	}
	return out
}

// syncInfra plans and, when the plan has changes, applies the resource's module. Before the apply
// it records status.lastRun as a Running apply (the crash window: a controller that dies during
// the apply finds that record and runs again, recovering its own stale lock); after, how it ended.
//
// before is the reconcile's snapshot that the final status patch is computed from; each record
// written mid-run moves it forward, so the final patch carries every field that changed since.
func (r *ResourceReconciler) syncInfra(ctx context.Context, res, before *v1alpha1.InfraResource, phase v1alpha1.ResourcePhase) (ctrl.Result, error) {
	now := time.Now()
	run, wait := needsRun(res, now, r.syncInterval())
	if !run && everApplied(res) && hasSecretInputs(res) && res.Status.LastRun.Result == RunSucceeded {
		changed, err := r.secretInputsRotated(ctx, res)
		if err != nil {
			return ctrl.Result{}, err
		}
		if changed {
			r.noteRotation(res)
			run = true
		} else {
			wait = min(wait, r.secretCheckInterval())
		}
	}
	if !run {
		staleApproval(res)
		switch {
		case !everApplied(res) && res.Status.LastRun != nil && res.Status.LastRun.Result == RunWaitingForApproval:
			res.Status.Phase = v1alpha1.ResourcePending
		case !everApplied(res):
			res.Status.Phase = v1alpha1.ResourceFailed
		default:
			res.Status.Phase = phase
			if err := r.keepConnectionSecret(ctx, res); err != nil {
				return ctrl.Result{RequeueAfter: wait}, err
			}
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if result, err, stop := r.beforeRun(ctx, res); stop {
		return result, err
	}
	spec, err := r.runSpec(ctx, res)
	var ie *inputError
	if errors.As(err, &ie) {
		r.setRunFailed(res, "render", ie.reason, ie.message, time.Now())
		return ctrl.Result{RequeueAfter: secretRetry}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if isDriftCheck(res) && !rotated(res, spec) {
		// The spec was applied and the sync interval passed: a read-only check comes first.
		correct, result, err := r.checkDrift(ctx, res, before, spec)
		if !correct || err != nil {
			if err == nil {
				res.Status.Phase = phase
			}
			return result, err
		}
		// The same spec serves the apply: backend() replaces the check's revoked TF_HTTP_* credentials.
	}
	return r.applyRun(ctx, res, before, phase, spec, now)
}

// beforeRun runs the phases every run needs first: recover a dead run's lock, adopt orphaned
// state, and the state checks. stop says the run must not happen now (result and err say why).
func (r *ResourceReconciler) beforeRun(ctx context.Context, res *v1alpha1.InfraResource) (ctrl.Result, error, bool) {
	// A state a dead run could not save goes back first (it releases that run's lock once
	// saved); a lock is never recovered while it is pending, even after a restart.
	if err := r.putBackState(ctx, res); err != nil {
		return r.stateStop(res, "state", err)
	}
	if err := r.recoverOwnLock(ctx, res); err != nil {
		return ctrl.Result{}, err, true
	}
	if err := r.adoptState(ctx, res); err != nil {
		var ae *statebackend.AdoptError
		if errors.As(err, &ae) {
			r.setRunFailed(res, "adopt", v1alpha1.ReasonAdoptionRefused, ae.Message, time.Now())
			return ctrl.Result{RequeueAfter: secretRetry}, nil, true
		}
		return ctrl.Result{}, err, true
	}
	if err := r.stateChecks(ctx, res); err != nil {
		return r.stateStop(res, "state", err)
	}
	return ctrl.Result{}, nil, false
}

// stateStop turns a state phase's error into beforeRun's answer: a *stateError is recorded as the
// failed operation op and retried after stateRetry; any other error goes to the work queue.
func (r *ResourceReconciler) stateStop(res *v1alpha1.InfraResource, op string, err error) (ctrl.Result, error, bool) {
	var se *stateError
	if errors.As(err, &se) {
		r.setRunFailed(res, op, se.reason, se.message, time.Now())
		return ctrl.Result{RequeueAfter: stateRetry}, nil, true
	}
	return ctrl.Result{}, err, true
}

// applyRun brings the infrastructure to the spec: one apply -json, or, when the run must stop
// between plan and apply (needsSavedPlan), plan, the approval gate, and apply of that plan.
func (r *ResourceReconciler) applyRun(ctx context.Context, res, before *v1alpha1.InfraResource, phase v1alpha1.ResourcePhase, spec tfrunner.Spec, now time.Time) (ctrl.Result, error) {
	if !everApplied(res) && res.Status.Phase != v1alpha1.ResourceFailed {
		// A first provisioning; a failed one stays Failed while it is retried, until it succeeds.
		res.Status.Phase = v1alpha1.ResourceProvisioning
	}
	savedPlan := needsSavedPlan(res)
	op := "apply"
	if savedPlan {
		op = "plan"
	}
	res.Status.LastRun = r.newRun(res, op, now)
	// The crash window: every command of the run may take the state lock, so the Running record
	// is written before the first of them.
	if err := r.record(ctx, res, before); err != nil {
		return ctrl.Result{}, err
	}
	revoke := r.backend(res, &spec)
	defer revoke()

	opts := tfrunner.ApplyOptions{
		SavedPlan: savedPlan,
		Check:     func(schema *tfrunner.ModuleSchema) error { return checkVariables(res, schema) },
		BeforeApply: func(p *tfrunner.Plan, render func() (string, error)) error {
			if err := r.gate(ctx, res, p, render); err != nil {
				return err
			}
			res.Status.LastRun.Operation = "apply"
			res.Status.LastRun.Summary = summaryOf(p)
			res.Status.LastRun.PlanID = p.ID
			return r.record(ctx, res, before)
		},
		Queued:        r.queued(ctx, res, before),
		OnCreateStart: r.recordCreateStart(ctx, res, before),
	}
	for _, imp := range res.Spec.Import {
		opts.Imports = append(opts.Imports, tfrunner.ImportTarget{Address: imp.Address, ID: imp.ID})
	}
	out, err := r.Runs.Apply(ctx, res.Name, spec, opts)
	done := time.Now()
	settleCreates(res, err)
	defer func() {
		metrics.ObserveRun(res.Status.LastRun.Operation, runResult(res.Status.LastRun, err), done.Sub(now))
	}()
	if out != nil && out.Plan != nil {
		if res.Status.LastRun.Summary == nil {
			res.Status.LastRun.Summary = summaryOf(out.Plan)
		}
		res.Status.LastRun.PlanID = out.Plan.ID
	}
	if out != nil {
		recordImports(res, out.Imports)
		defer func() { r.recordRun(ctx, res, out.Log) }()
	}
	if err != nil {
		return r.runFailed(ctx, res, err, done)
	}
	if err := r.writeConnectionSecret(ctx, res, out.Outputs); err != nil {
		r.setRunFailed(res, "output", v1alpha1.ReasonApplyFailed, err.Error(), done)
		return ctrl.Result{}, err
	}
	if err := r.consumeAnnotations(ctx, res, out.Applied); err != nil {
		return ctrl.Result{}, err
	}
	res.Status.LastRun.Result = RunSucceeded
	res.Status.LastRun.CompletionTime = &metav1.Time{Time: done}
	if !out.Applied {
		res.Status.LastRun.Operation = "plan"
	}
	res.Status.ObservedGeneration = res.Generation
	res.Status.InputsHash = inputsHash(res, spec)
	res.Status.ModuleVersion = res.Spec.Module.Version
	if out.Schema != nil && out.Schema.Version != "" {
		res.Status.ModuleVersion = out.Schema.Version // a registry constraint, resolved by init
	}
	res.Status.Phase = phase
	res.Status.PendingPlan, res.Status.PendingPlanID = nil, ""
	setOutputs(res, out.Outputs)
	r.readState(ctx, res)
	msg := fmt.Sprintf("plan: %d to add, %d to change, %d to destroy%s", res.Status.LastRun.Summary.Add,
		res.Status.LastRun.Summary.Change, res.Status.LastRun.Summary.Destroy, describeChanges(out.Plan))
	setCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonApplied, msg)
	setCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonApplied, "infrastructure matches the spec")
	if res.Status.Drift != nil && res.Status.Drift.Drifted && out.Applied {
		res.Status.Drift.Drifted = false
		setCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionDrifted, metav1.ConditionFalse, v1alpha1.ReasonNoDrift, "the drift was corrected")
	}
	if out.Applied {
		r.Recorder.Eventf(res, nil, corev1.EventTypeNormal, v1alpha1.ReasonApplied, "Apply", "%s", msg)
	}
	return ctrl.Result{RequeueAfter: jitter(r.syncInterval())}, nil
}

// queued records a waiting run's place in line (Synced=Unknown, WaitingForRunner).
func (r *ResourceReconciler) queued(ctx context.Context, res, before *v1alpha1.InfraResource) func(position, waiting int) {
	return func(position, waiting int) {
		setCondition(&res.Status.Conditions, res.Generation, v1alpha1.ConditionSynced, metav1.ConditionUnknown, v1alpha1.ReasonWaitingForRunner,
			fmt.Sprintf("waiting for a runner: %d in line of %d waiting (runs are served across namespaces in turn)", position, waiting))
		if err := r.record(ctx, res, before); err != nil {
			log.FromContext(ctx).V(1).Info("could not record the place in line", "error", err.Error())
		}
	}
}

// consumeAnnotations removes the one-shot annotations a successful run used: an approval is for
// one plan, starting from empty state is allowed once.
func (r *ResourceReconciler) consumeAnnotations(ctx context.Context, res *v1alpha1.InfraResource, applied bool) error {
	keys := []string{v1alpha1.AnnotationStartFresh}
	if applied {
		keys = append(keys, v1alpha1.AnnotationApprovePlan, v1alpha1.AnnotationApproveReplace)
	}
	for _, k := range keys {
		if _, ok := res.Annotations[k]; ok {
			if err := r.removeAnnotation(ctx, res, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// everApplied reports whether an apply of some generation succeeded.
func everApplied(res *v1alpha1.InfraResource) bool { return res.Status.ObservedGeneration > 0 }

func summaryOf(p *tfrunner.Plan) *v1alpha1.PlanSummary {
	return &v1alpha1.PlanSummary{Add: int32(p.Summary.Add), Change: int32(p.Summary.Change),
		Destroy: int32(p.Summary.Destroy), Import: int32(p.Summary.Import)}
}

// readState records the state Secret's serial and lineage and any lock in status.
func (r *ResourceReconciler) readState(ctx context.Context, res *v1alpha1.InfraResource) {
	sfx := suffix(res)
	st, found, err := statebackend.Read(ctx, r.Kube, r.State.Namespace, statebackend.DefaultWorkspace, sfx)
	// The name is the one chosen once, whatever the read says: a failed read must not erase it.
	res.Status.State = &v1alpha1.StateStatus{SecretName: statebackend.SecretName(statebackend.DefaultWorkspace, sfx), AdoptedFrom: adoptedFrom(res)}
	if err != nil || !found {
		return
	}
	res.Status.State.Serial = st.Serial
	res.Status.State.Lineage = st.Lineage
	if lock, err := statebackend.InspectLock(ctx, r.Kube, r.State.Namespace, statebackend.DefaultWorkspace, suffix(res)); err == nil {
		setLock(res, lock)
		res.Status.State.LockStale = r.isStale(res, lock, time.Now())
	}
}

// record writes the status as it is in memory, before a side effect, and moves the reconcile's
// snapshot (before) forward to it, so that the final patch still carries every later change.
//
// The patch carries status fields only, never a resourceVersion: other writers (the claim
// controller binding the resource) must not make the record fail.
func (r *ResourceReconciler) record(ctx context.Context, res, before *v1alpha1.InfraResource) error {
	before.ResourceVersion = res.ResourceVersion
	if err := r.Status().Patch(ctx, res, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("recording the run in status: %w", err)
	}
	before.ResourceVersion = res.ResourceVersion
	before.Status = *res.Status.DeepCopy()
	return nil
}

func adoptedFrom(res *v1alpha1.InfraResource) string {
	if res.Status.State == nil {
		return ""
	}
	return res.Status.State.AdoptedFrom
}

func (r *ResourceReconciler) syncInterval() time.Duration {
	if r.SyncInterval > 0 {
		return r.SyncInterval
	}
	return DefaultSyncInterval
}

func jsonValue(raw []byte) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: append([]byte(nil), raw...)}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
