package secrets

// A run's inputs: the module, the rendered variables, and the Secret inputs read now (never
// stored); the Kubernetes credentials and cloud identity are in access.go and identity.go.

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// tenant is who a resource's runs are for, for the pool's fair share: the bound claim's namespace,
// or "" for a static resource.
func tenant(res *v1alpha1.InfraResource) string {
	if res.Spec.ClaimRef != nil {
		return res.Spec.ClaimRef.Namespace
	}
	return ""
}

// className is the resource's class, "" for a static resource.
func className(res *v1alpha1.InfraResource) string {
	if res.Spec.ClassRef == nil {
		return ""
	}
	return res.Spec.ClassRef.Name
}

// RunSpec assembles what a run needs: the module, the backend, the rendered variables, the
// Secret inputs read now (never stored), the generated passwords (made when due, passwords.go), and the Kubernetes credentials and cloud identity the
// resource grants its runs (kubernetesAccess, workloadIdentity), requested now. It returns an *provision.InputError when a Secret or key is
// missing or the ServiceAccount gets no token.
func (r *Keeper) RunSpec(ctx context.Context, res *v1alpha1.InfraResource) (tfrunner.Spec, error) {
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
	err := r.SecretInputs(ctx, res, &spec)
	if err != nil {
		return spec, err
	}
	if _, err := r.PasswordInputs(ctx, res, &spec, true); err != nil {
		return spec, err
	}
	if spec.SourceCredentials, err = provision.ReadModuleCredentials(ctx, r.reader, r.namespace, res.Spec.ModuleCredentials); err != nil {
		return spec, err
	}
	if spec.Kubeconfig, err = r.kubernetesAccess(ctx, res); err != nil {
		return spec, err
	}
	spec.Identity, err = r.workloadIdentity(ctx, res)
	return spec, err
}

// SecretInputs reads the resource's variablesFrom into spec.SensitiveVariables and its env into
// spec.Env, now, from the API server; an *provision.InputError when a Secret or key is missing.
func (r *Keeper) SecretInputs(ctx context.Context, res *v1alpha1.InfraResource, spec *tfrunner.Spec) error {
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

func (r *Keeper) secretValue(ctx context.Context, in v1alpha1.SecretInput) (string, error) {
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
