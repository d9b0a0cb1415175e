package resource

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// Runs is the boundary between the resource controller and Terraform (runners.Router implements
// it for the in-process pool and runner pools alike): a run in, its outcome out. Where a run
// happens, its workspace, and a state it could not save (which the carrier hands to the state
// server's pending state as soon as the run returns) stay behind it.
type Runs interface {
	// Apply brings key's infrastructure to spec (one apply -json, or plan, opts' gate, apply).
	Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error)
	// Destroy destroys everything key's state holds.
	Destroy(ctx context.Context, key string, spec tfrunner.Spec) error
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

// className is the resource's class, "" for a static resource.
func className(res *v1alpha1.InfraResource) string {
	if res.Spec.ClassRef == nil {
		return ""
	}
	return res.Spec.ClassRef.Name
}

// runSpec assembles what a run needs: the module, the backend, the rendered variables, the
// Secret inputs read now (never stored), and the Kubernetes credentials and cloud identity the
// resource grants its runs (kubernetesAccess, workloadIdentity), requested now. It returns an *provision.InputError when a Secret or key is
// missing or the ServiceAccount gets no token.
func (r *resourceSecrets) runSpec(ctx context.Context, res *v1alpha1.InfraResource) (tfrunner.Spec, error) {
	spec := tfrunner.Spec{
		Tenant:             tenant(res),
		Class:              className(res),
		RunnerPool:         res.Spec.RunnerPool,
		ColdProviders:      res.Spec.WarmProviders == v1alpha1.WarmProvidersDisabled,
		Module:             tfrunner.Module{Source: res.Spec.Module.Source, Version: res.Spec.Module.Version},
		Variables:          map[string]any{},
		SensitiveVariables: map[string]string{},
		Env:                map[string]string{},
	}
	for name, v := range res.Spec.Variables {
		spec.Variables[name] = json.RawMessage(v.Raw)
	}
	err := r.readSecretInputs(ctx, res, &spec)
	if err != nil {
		return spec, err
	}
	if spec.SourceCredentials, err = provision.ReadModuleCredentials(ctx, r.reader, r.config.Namespace, res.Spec.ModuleCredentials); err != nil {
		return spec, err
	}
	if spec.Kubeconfig, err = r.kubernetesAccess(ctx, res); err != nil {
		return spec, err
	}
	spec.Identity, err = r.workloadIdentity(ctx, res)
	return spec, err
}

// readSecretInputs reads the resource's variablesFrom into spec.SensitiveVariables and its env into
// spec.Env, now, from the API server; an *provision.InputError when a Secret or key is missing.
func (r *resourceSecrets) readSecretInputs(ctx context.Context, res *v1alpha1.InfraResource, spec *tfrunner.Spec) error {
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

func (r *resourceSecrets) secretValue(ctx context.Context, in v1alpha1.SecretInput) (string, error) {
	ref := in.SecretKeyRef
	s := &corev1.Secret{}
	if err := r.reader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &provision.InputError{Reason: v1alpha1.ReasonSecretNotFound, Message: fmt.Sprintf("%s: Secret %s/%s not found", in.Name, ref.Namespace, ref.Name)}
		}
		return "", err
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		return "", &provision.InputError{Reason: v1alpha1.ReasonSecretNotFound, Message: fmt.Sprintf("%s: Secret %s/%s has no key %q", in.Name, ref.Namespace, ref.Name, ref.Key)}
	}
	return string(v), nil
}

// everApplied reports whether an apply of some generation succeeded.
func everApplied(res *v1alpha1.InfraResource) bool { return res.Status.ObservedGeneration > 0 }

func summaryOf(p *tfrunner.Plan) *v1alpha1.PlanSummary {
	return &v1alpha1.PlanSummary{Add: int32(p.Summary.Add), Change: int32(p.Summary.Change),
		Destroy: int32(p.Summary.Destroy), Import: int32(p.Summary.Import)}
}

// readState records the state Secret's serial and lineage in status, after a run that ended on its
// own: it released its lock, so status shows none (a lock taken since is seen when a run meets it,
// lockHeld).
//
// A state the run stored through the state server is known without a read (Server.TakeWritten).
func (r *stateKeeper) readState(ctx context.Context, s *resourceScope) {
	res, sfx := s.res, s.state.Suffix()
	st, found, err := statebackend.State{}, false, error(nil)
	if r.server != nil {
		st, found = r.server.TakeWritten(sfx)
	}
	if !found {
		st, found, err = s.state.Status(ctx)
	}
	// The name is the one chosen once, whatever the read says: a failed read must not erase it.
	res.Status.State = &v1alpha1.StateStatus{SecretName: statebackend.SecretName(statebackend.DefaultWorkspace, sfx), AdoptedFrom: adoptedFrom(res)}
	if err != nil || !found {
		return
	}
	res.Status.State.Serial = st.Serial
	res.Status.State.Lineage = st.Lineage
}

func adoptedFrom(res *v1alpha1.InfraResource) string {
	if res.Status.State == nil {
		return ""
	}
	return res.Status.State.AdoptedFrom
}

func jsonValue(raw []byte) apiextensionsv1.JSON {
	return apiextensionsv1.JSON{Raw: append([]byte(nil), raw...)}
}
