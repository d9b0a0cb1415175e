package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

// rootModule is the name a run calls the resource's module by (tfrunner.ModuleName; the plugin
// does not import the run path, and a test checks the two agree).
const rootModule = "main"

// The objects of the controllers users come from: tofu-controller's Terraform and
// provider-terraform's Workspace.
var (
	terraformKind = schema.GroupVersionKind{Group: "infra.contrib.fluxcd.io", Version: "v1alpha2", Kind: "Terraform"}
	workspaceKind = schema.GroupVersionKind{Group: "tf.upbound.io", Version: "v1beta1", Kind: "Workspace"}
)

type adoptOptions struct {
	class, name string
	reclaim     string
	vars        []string
}

func newAdoptCommand(o *rootOptions) *cobra.Command {
	a := &adoptOptions{}
	cmd := &cobra.Command{
		Use:   "adopt terraform/NAME | workspace/NAME | secret/NAME --class CLASS",
		Short: "Bring a tofu-controller Terraform's, a provider-terraform Workspace's, or any kubernetes-backend state under a resource",
		Long: `Create an InfraResource of CLASS that adopts the Terraform state another controller keeps in
Terraform's kubernetes backend, without touching the infrastructure:

  terraform/NAME   tofu-controller's Terraform (namespace -n): its state Secret
                   tfstate-<spec.workspace>-<spec.backendConfig.secretSuffix, else NAME>, and
                   its spec.vars as the resource's variables
  workspace/NAME   provider-terraform's Workspace: the one state Secret of its Terraform workspace
                   (the crossplane.io/external-name annotation, else NAME), found by the backend's
                   labels in any namespace; its spec.forProvider.vars as variables
  secret/NAME      a state Secret of namespace -n written by the kubernetes backend

The state is copied into the controller's namespace with its resources moved under the module a
run calls (module.main), and adopted by the new resource before its first plan; the original is
left as it is, labelled conductor.io/adopted-by=<resource>. Suspend the old controller's object
first. The resource takes the class's module and settings, the variables found (and --var
name=JSON, which win), and reclaim policy Retain unless --reclaim-policy Delete: conductor-tf's
default for claims is Delete, which destroys the infrastructure when the claim goes.

Its first plan shows what differs between the state and the class's module with these
variables: "kubectl conductor plan resource/NAME" before anything applies (with the class's
approval: Manual nothing applies until approved). docs/migrating.md maps the concepts.

Example:
  kubectl conductor adopt terraform/my-bucket -n flux-system --class buckets --name my-bucket
  kubectl conductor adopt secret/tfstate-default-legacy -n infra --class buckets --var region='"eu-west-1"'`,
		Args: cobra.ExactArgs(1),
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, args []string) error {
			return runAdopt(cmd.Context(), o.streams.Out, cl, args[0], a)
		}),
	}
	cmd.Flags().StringVar(&a.class, "class", "", "the InfraClass whose module and settings the resource takes (required)")
	cmd.Flags().StringVar(&a.name, "name", "", "the InfraResource's name (default: the source's name)")
	cmd.Flags().StringVar(&a.reclaim, "reclaim-policy", string(v1alpha1.ReclaimRetain), "Retain or Delete")
	cmd.Flags().StringArrayVar(&a.vars, "var", nil, "name=JSON: a variable of the resource, over those found")
	return cmd
}

// adoptSource is what a source object says: where its state is, its name and its variables.
type adoptSource struct {
	state statebackend.ForeignState
	name  string
	vars  v1alpha1.Variables
}

// runAdopt creates the resource adopting the state of source (KIND/NAME) and writes what it did to
// out. Errors: an unknown kind, a source or class not found, an unreadable --var, CopyForeign's,
// and the resource's creation (AlreadyExists when the name is taken).
func runAdopt(ctx context.Context, out io.Writer, cl *Clients, source string, a *adoptOptions) error {
	if a.class == "" {
		return fmt.Errorf("--class is required: the class whose module the adopted state was made with")
	}
	if a.reclaim != string(v1alpha1.ReclaimRetain) && a.reclaim != string(v1alpha1.ReclaimDelete) {
		return fmt.Errorf("--reclaim-policy %q: Retain or Delete", a.reclaim)
	}
	given := v1alpha1.Variables{}
	for _, v := range a.vars {
		k, raw, ok := strings.Cut(v, "=")
		if !ok || !json.Valid([]byte(raw)) {
			return fmt.Errorf("--var %q: want name=JSON (a string is quoted: name='\"value\"')", v)
		}
		given[k] = apiextensionsv1.JSON{Raw: []byte(raw)}
	}
	src, err := findSource(ctx, cl, source)
	if err != nil {
		return err
	}
	if err := checkUnlocked(ctx, cl, src.state); err != nil {
		return err
	}
	maps.Copy(src.vars, given)
	class := &v1alpha1.InfraClass{}
	if err := cl.Client.Get(ctx, client.ObjectKey{Name: a.class}, class); err != nil {
		return fmt.Errorf("class %s: %w", a.class, err)
	}
	name := a.name
	if name == "" {
		name = src.name
	}
	copied, err := statebackend.CopyForeign(ctx, cl.Kube, src.state, cl.ControllerNamespace, name, rootModule)
	if err != nil {
		return err
	}
	res := &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelClass: v1alpha1.LabelValue(class.Name)}},
		Spec: v1alpha1.InfraResourceSpec{
			ResourceKind: class.Spec.ResourceKind, ClassRef: &v1alpha1.ClassReference{Name: class.Name}, Module: class.Spec.Module,
			Variables: src.vars, RunInputs: *class.Spec.RunInputs.DeepCopy(),
			Capabilities: class.Spec.Capabilities, AllowedNamespaces: class.Spec.AllowedNamespaces,
			Operations: class.Spec.Operations, ReclaimPolicy: v1alpha1.ReclaimPolicy(a.reclaim), AdoptState: copied,
		},
	}
	if err := cl.Client.Create(ctx, res); err != nil {
		return fmt.Errorf("creating resource %s (the state is copied to %s/%s): %w", name, cl.ControllerNamespace, copied, err)
	}
	fmt.Fprintf(out, "Copied the state %s to %s/%s (resources moved under module.%s); the original is labelled %s=%s.\n",
		src.state, cl.ControllerNamespace, copied, rootModule, statebackend.LabelAdoptedBy, v1alpha1.LabelValue(name))
	fmt.Fprintf(out, "Created resource %s of class %s, reclaim policy %s, adopting it before its first plan.\n", name, class.Name, a.reclaim)
	fmt.Fprintf(out, "Next: kubectl conductor plan resource/%s (no change expected when the variables match).\n", name)
	return nil
}

// findSource reads KIND/NAME: terraform (tofu-controller, namespace cl.Namespace), workspace
// (provider-terraform, cluster-scoped) or secret (namespace cl.Namespace).
func findSource(ctx context.Context, cl *Clients, source string) (*adoptSource, error) {
	kind, name, ok := strings.Cut(source, "/")
	if !ok || name == "" {
		return nil, fmt.Errorf("%q: want terraform/NAME, workspace/NAME or secret/NAME", source)
	}
	switch strings.ToLower(kind) {
	case "terraform", "terraforms":
		return terraformSource(ctx, cl, name)
	case "workspace", "workspaces":
		return workspaceSource(ctx, cl, name)
	case "secret", "secrets":
		return secretSource(ctx, cl, cl.Namespace, name)
	}
	return nil, fmt.Errorf("%q: want terraform/NAME, workspace/NAME or secret/NAME", source)
}
