package main

import (
	"context"
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// Errors: not found; not suspended (spec.suspend), or destroyResourcesOnDeletion; a custom or
// disabled backend (the state is not in a Secret we can name); a variable from valueFrom or
// varsFrom (not read: give it with --var).
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
	if suspended, _, _ := unstructured.NestedBool(tf.Object, "spec", "suspend"); !suspended {
		return nil, fmt.Errorf("terraform/%s is not suspended: tofu-controller still applies its state, and two controllers would apply one state; set spec.suspend: true, then adopt", name)
	}
	if destroys, _, _ := unstructured.NestedBool(tf.Object, "spec", "destroyResourcesOnDeletion"); destroys {
		return nil, fmt.Errorf("terraform/%s has spec.destroyResourcesOnDeletion: true: deleting it would destroy what conductor-tf then manages; set it to false, then adopt", name)
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
// namespace cl.Namespace (the suffix is in its ProviderConfig's HCL); spec.forProvider.vars are its
// variables (strings). Errors: not found; not paused (crossplane.io/paused), or a deletionPolicy
// other than Orphan; no state Secret there, or several.
func workspaceSource(ctx context.Context, cl *Clients, name string) (*adoptSource, error) {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(workspaceKind)
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: name}, w); err != nil {
		return nil, fmt.Errorf("workspace/%s: %w", name, notInstalled(err, workspaceKind))
	}
	if w.GetAnnotations()["crossplane.io/paused"] != "true" {
		return nil, fmt.Errorf("workspace/%s is not paused: provider-terraform still applies its state, and two controllers would apply one state; annotate it crossplane.io/paused=true, then adopt", name)
	}
	if policy, _, _ := unstructured.NestedString(w.Object, "spec", "deletionPolicy"); policy != "Orphan" {
		return nil, fmt.Errorf("workspace/%s has deletionPolicy %q: deleting it would destroy what conductor-tf then manages; set spec.deletionPolicy: Orphan, then adopt", name, orDefault(policy, "Delete"))
	}
	ws := w.GetAnnotations()["crossplane.io/external-name"]
	if ws == "" {
		ws = name
	}
	// The namespace is the one named (-n, else the context's): never the only labelled Secret of
	// some namespace.
	list, err := cl.Kube.CoreV1().Secrets(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "tfstate=true," + labelStateWorkspace + "=" + ws})
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
		return nil, fmt.Errorf("workspace/%s: %d state Secrets of Terraform workspace %q in namespace %s (%v): name the namespace of its ProviderConfig's backend with -n, or adopt secret/NAME -n NS",
			name, len(found), ws, cl.Namespace, found)
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

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkUnlocked refuses a foreign state whose kubernetes-backend lock (the Lease beside its Secret,
// statebackend.LeaseName: Terraform's backend/remote-state/kubernetes layout) has a holder: a run
// of the old controller, or a person, holds it now.
func checkUnlocked(ctx context.Context, cl *Clients, f statebackend.ForeignState) error {
	name := statebackend.LeaseName(f.Workspace, f.Suffix)
	l, err := cl.Kube.CoordinationV1().Leases(f.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the state's lock Lease %s/%s: %w", f.Namespace, name, err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		return fmt.Errorf("the state %s is locked (Lease %s/%s, holder %q): a run of its old controller, or a person, holds it; wait for it to end (or force-unlock it with terraform), then adopt",
			f, f.Namespace, name, *h)
	}
	return nil
}
