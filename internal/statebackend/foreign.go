package statebackend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// LabelAdoptedBy labels a state Secret of another controller (tofu-controller, provider-terraform,
// a team's own kubernetes backend) that CopyForeign copied for a resource: the resource's name.
const LabelAdoptedBy = "conductor.io/adopted-by"

// ForeignState is a workspace's state written by Terraform's kubernetes backend outside the
// controller's namespace: the Secret tfstate-<Workspace>-<Suffix> of Namespace (and its -part-N
// chunks).
type ForeignState struct {
	Namespace, Workspace, Suffix string
}

// Secret is the name of the state's first Secret.
func (f ForeignState) Secret() string { return SecretName(f.Workspace, f.Suffix) }

func (f ForeignState) String() string { return f.Namespace + "/" + f.Secret() }

// CopyForeign copies the foreign state f into namespace (the controller's) as an orphaned state
// for resource, and returns the copy's name: what the resource's spec.adoptState names, so that
// the resource controller then adopts it as any orphaned state (adopt). The foreign state's root
// module is the module a conductor-tf run calls as module.<intoModule> (tfrunner.ModuleName), so
// the copy has every resource moved under it (NestState): otherwise the first plan would destroy
// them at their old addresses and create them at the new. The copy is
// tfstate-default-<SuffixFor("adopted."+resource)> in Terraform's layout (gzip, 1 MiB chunks),
// labelled LabelOrphanedFrom with f. The original is left as it is but labelled
// LabelAdoptedBy=resource (its own controller may still run: suspend it first). Calling it again
// with the same f and resource finds the copy made and returns it. Errors: an *AdoptError when f
// does not exist or holds no state, or resource already has a copy of another state; NestState's;
// the API's otherwise.
func CopyForeign(ctx context.Context, kube kubernetes.Interface, f ForeignState, namespace, resource, intoModule string) (string, error) {
	src, err := kube.CoreV1().Secrets(f.Namespace).Get(ctx, f.Secret(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", &AdoptError{fmt.Sprintf("state Secret %s does not exist", f)}
	}
	if err != nil {
		return "", err
	}
	state, found, err := assembleState(ctx, kube, f.Namespace, f.Workspace, f.Suffix, src)
	if err != nil {
		return "", err
	}
	if !found {
		return "", &AdoptError{fmt.Sprintf("Secret %s holds no Terraform state (no %s key)", f, stateKey)}
	}
	origin := v1alpha1.LabelValue(f.Namespace + "." + f.Secret())
	suffix := SuffixFor("adopted." + resource)
	name := SecretName(DefaultWorkspace, suffix)
	existing, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil && existing.Labels[LabelOrphanedFrom] != origin:
		return "", &AdoptError{fmt.Sprintf("%s/%s holds a copy of %s, not of %s", namespace, name, existing.Labels[LabelOrphanedFrom], f)}
	case err == nil:
		return name, labelAdoptedBy(ctx, kube, src, resource)
	case !apierrors.IsNotFound(err):
		return "", err
	}
	nested, err := NestState(state, intoModule)
	if err != nil {
		return "", fmt.Errorf("state %s: %w", f, err)
	}
	if err := writeStateJSON(ctx, kube, namespace, DefaultWorkspace, suffix, map[string]string{LabelOrphanedFrom: origin}, nested); err != nil {
		return "", fmt.Errorf("copying %s to %s/%s: %w", f, namespace, name, err)
	}
	return name, labelAdoptedBy(ctx, kube, src, resource)
}

// NestState returns the Terraform state (format version 4, JSON) with every resource moved one
// module down, under module.<name>: a root resource gets "module": "module.<name>", one of
// module.x gets "module.<name>.module.x" (the layout of state v4's resources). Provider
// configuration addresses, outputs, lineage and serial are kept; check results, which name the
// old addresses, are dropped (the next plan records them again). Numbers are kept as written.
// Errors: the state is not JSON, or not version 4.
func NestState(state []byte, name string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(state))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	if v, _ := doc["version"].(json.Number); v.String() != "4" {
		return nil, fmt.Errorf("state format version %v, want 4", doc["version"])
	}
	prefix := "module." + name
	resources, _ := doc["resources"].([]any)
	for _, r := range resources {
		res, ok := r.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("state resource %v is not an object", r)
		}
		if m, _ := res["module"].(string); m != "" {
			res["module"] = prefix + "." + m
		} else {
			res["module"] = prefix
		}
	}
	delete(doc, "check_results")
	return json.MarshalIndent(doc, "", "  ")
}

// labelAdoptedBy labels the original state Secret with the resource that adopted a copy of it.
func labelAdoptedBy(ctx context.Context, kube kubernetes.Interface, src *corev1.Secret, resource string) error {
	if src.Labels[LabelAdoptedBy] == v1alpha1.LabelValue(resource) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{LabelAdoptedBy: v1alpha1.LabelValue(resource)}}})
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Secrets(src.Namespace).Patch(ctx, src.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}
