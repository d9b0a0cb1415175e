package main

import (
	"context"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// The kubernetes backend's labels on a workspace's state Secret (Terraform's
// backend/remote-state/kubernetes: tfstateWorkspaceKey, tfstateSecretSuffixKey).
const (
	labelStateWorkspace = "tfstateWorkspace"
	labelStateSuffix    = "tfstateSecretSuffix"
)

// terraformSource reads tofu-controller's Terraform namespace/name: its state is in its own
// namespace under its workspace (spec.workspace, default "default") and suffix
// (spec.backendConfig.secretSuffix, default its name); spec.vars[].value are its variables.
// Errors: not found; a custom or disabled backend (the state is not in a Secret we can name);
// a variable from valueFrom or varsFrom (not read: give it with --var).
func terraformSource(ctx context.Context, cl *Clients, name string) (*adoptSource, error) {
	tf := &unstructured.Unstructured{}
	tf.SetGroupVersionKind(terraformKind)
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: name}, tf); err != nil {
		return nil, fmt.Errorf("terraform/%s in %s: %w", name, cl.Namespace, notInstalled(err, terraformKind))
	}
	if custom, _, _ := unstructured.NestedString(tf.Object, "spec", "backendConfig", "customConfiguration"); custom != "" {
		return nil, fmt.Errorf("terraform/%s has a custom backend (spec.backendConfig.customConfiguration): copy its state to a Secret and adopt secret/NAME", name)
	}
	if off, _, _ := unstructured.NestedBool(tf.Object, "spec", "backendConfig", "disable"); off {
		return nil, fmt.Errorf("terraform/%s has no backend (spec.backendConfig.disable): there is no state Secret to adopt", name)
	}
	suffix, _, _ := unstructured.NestedString(tf.Object, "spec", "backendConfig", "secretSuffix")
	if suffix == "" {
		suffix = name
	}
	ws, _, _ := unstructured.NestedString(tf.Object, "spec", "workspace")
	if ws == "" {
		ws = statebackend.DefaultWorkspace
	}
	src := &adoptSource{name: name, vars: v1alpha1.Variables{},
		state: statebackend.ForeignState{Namespace: cl.Namespace, Workspace: ws, Suffix: suffix}}
	if from, _, _ := unstructured.NestedSlice(tf.Object, "spec", "varsFrom"); len(from) > 0 {
		return nil, fmt.Errorf("terraform/%s reads variables from spec.varsFrom, which adopt does not: give them with --var, or put them in the class's variablesFrom", name)
	}
	vars, _, _ := unstructured.NestedSlice(tf.Object, "spec", "vars")
	for _, v := range vars {
		m, _ := v.(map[string]any)
		key, _ := m["name"].(string)
		value, ok := m["value"]
		if !ok {
			return nil, fmt.Errorf("terraform/%s: spec.vars %q has no value (valueFrom is not read): give it with --var", name, key)
		}
		raw, err := json.Marshal(value)
		if err != nil {
			return nil, err
		}
		src.vars[key] = apiextensionsv1.JSON{Raw: raw}
	}
	return src, nil
}

// workspaceSource reads provider-terraform's Workspace name: its state is the one Secret of
// Terraform workspace crossplane.io/external-name (else its name), found by the backend's labels in
// any namespace (the suffix is in its ProviderConfig's HCL); spec.forProvider.vars are its
// variables (strings). Errors: not found; no state Secret, or several.
func workspaceSource(ctx context.Context, cl *Clients, name string) (*adoptSource, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(workspaceKind)
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: name}, w); err != nil {
		return nil, fmt.Errorf("workspace/%s: %w", name, notInstalled(err, workspaceKind))
	}
	ws := w.GetAnnotations()["crossplane.io/external-name"]
	if ws == "" {
		ws = name
	}
	list, err := cl.Kube.CoreV1().Secrets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "tfstate=true," + labelStateWorkspace + "=" + ws})
	if err != nil {
		return nil, err
	}
	var found []statebackend.ForeignState
	for _, s := range list.Items {
		f := statebackend.ForeignState{Namespace: s.Namespace, Workspace: ws, Suffix: s.Labels[labelStateSuffix]}
		if f.Secret() == s.Name {
			found = append(found, f)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("workspace/%s: %d state Secrets of Terraform workspace %q (%v): adopt secret/NAME -n NS", name, len(found), ws, found)
	}
	src := &adoptSource{name: name, state: found[0], vars: v1alpha1.Variables{}}
	vars, _, _ := unstructured.NestedSlice(w.Object, "spec", "forProvider", "vars")
	for _, v := range vars {
		m, _ := v.(map[string]any)
		key, _ := m["key"].(string)
		value, _ := m["value"].(string)
		raw, _ := json.Marshal(value)
		src.vars[key] = apiextensionsv1.JSON{Raw: raw}
	}
	return src, nil
}

// secretSource reads the state Secret namespace/name, which the kubernetes backend labels with its
// workspace and suffix; the resource is named after the suffix. Errors: not found, or not
// labelled so.
func secretSource(ctx context.Context, cl *Clients, namespace, name string) (*adoptSource, error) {
	s, err := cl.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("secret/%s in %s: %w", name, namespace, err)
	}
	f := statebackend.ForeignState{Namespace: namespace, Workspace: s.Labels[labelStateWorkspace], Suffix: s.Labels[labelStateSuffix]}
	if f.Workspace == "" || f.Suffix == "" || f.Secret() != name {
		return nil, fmt.Errorf("secret/%s in %s is not a state Secret of Terraform's kubernetes backend (labels %s and %s)", name, namespace, labelStateWorkspace, labelStateSuffix)
	}
	return &adoptSource{name: f.Suffix, state: f, vars: v1alpha1.Variables{}}, nil
}

// notInstalled says which kind is missing when err is the API's "no matches for kind" (the
// controller the kind belongs to is not installed here); other errors are returned as they are.
func notInstalled(err error, gvk schema.GroupVersionKind) error {
	if meta.IsNoMatchError(err) || discovery.IsGroupDiscoveryFailedError(err) {
		return fmt.Errorf("the kind %s is not served by this cluster (is its controller installed?)", gvk)
	}
	return err
}
