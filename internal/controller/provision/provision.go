// Package provision is how a class becomes a resource, as pure functions of the API objects and
// shared by the claim, class and resource reconcilers: the names that tie a claim and its
// resource (naming.go), a class's templates rendered for a claim (provision.go) and checked before
// any claim exists (check.go), and a class's module credentials (credentials.go).
package provision

import (
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/render"
)

// ResourceFromClass builds the InfraResource named name dynamically provisioned for a claim (name
// is one of ResourceNames: templates see it as resource.name): the class's module pinned (source
// and version copied), its variables and import identities rendered against the claim, its Secret
// references copied (never their values), capacity equal to the claim's requests, pre-bound to the
// claim and labelled with the claim's namespace and name and the class. It returns a
// *render.Error when a template does not render.
func ResourceFromClass(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, name string) (*v1alpha1.InfraResource, error) {
	vars, err := RenderVariables(claim, class, name)
	if err != nil {
		return nil, err
	}
	ids, err := RenderIdentities(claim, class, name)
	if err != nil {
		return nil, err
	}
	policy := class.Spec.ReclaimPolicy
	if policy == "" {
		policy = v1alpha1.ReclaimDelete
	}
	runInputs := *class.Spec.RunInputs.DeepCopy()
	if runInputs.VariablesFrom, err = VariablesFrom(claim, class); err != nil {
		return nil, err
	}
	annotations := map[string]string{
		v1alpha1.AnnotationProvisionedBy:      "conductor-tf",
		v1alpha1.AnnotationRenderedGeneration: strconv.FormatInt(claim.Generation, 10),
	}
	SetInputAnnotations(annotations, claim)
	return &v1alpha1.InfraResource{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				v1alpha1.LabelClaimNamespace: claim.Namespace,
				v1alpha1.LabelClaimName:      v1alpha1.LabelValue(claim.Name),
				v1alpha1.LabelClass:          v1alpha1.LabelValue(class.Name),
			},
			Annotations: annotations,
			// Born with the resource controller's finalizers: its first reconcile need not add them.
			Finalizers: []string{v1alpha1.FinalizerResource, v1alpha1.FinalizerInUse},
		},
		Spec: v1alpha1.InfraResourceSpec{
			ResourceKind:     claim.Spec.ResourceKind,
			ClassRef:         &v1alpha1.ClassReference{Name: class.Name},
			Module:           class.Spec.Module,
			Variables:        vars,
			ImportIdentities: ids,
			RunInputs:        runInputs,
			Capacity:         claim.Spec.Resources.Requests.DeepCopy(),
			Capabilities:     maps.Clone(class.Spec.Capabilities),
			ClaimRef:         &v1alpha1.ClaimReference{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
			ReclaimPolicy:    policy,
			Operations:       class.Spec.Operations,
			// The class's namespaces, so that a released resource is never bound from elsewhere.
			AllowedNamespaces: class.Spec.AllowedNamespaces.DeepCopy(),
		},
	}, nil
}

// RenderVariables evaluates the class's variables template against the claim, for the resource
// named resource (see package render), and returns the values as the resource stores them, with
// the claim's non-sensitive inputs that name a module variable the class leaves unset (inputs.go).
// It returns a *render.Error when a template does not parse or does not evaluate, and an
// *InputError when a sensitive input names no such variable.
func RenderVariables(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, resource string) (v1alpha1.Variables, error) {
	encoded, err := renderTemplates(claim, class, resource, RawVariables(class.Spec.Variables))
	if err != nil {
		return nil, err
	}
	out := make(v1alpha1.Variables, len(encoded))
	for k, v := range encoded {
		out[k] = apiextensionsv1.JSON{Raw: v}
	}
	if err := passInputs(claim, class, out); err != nil {
		return nil, err
	}
	return out, nil
}

// SetInputAnnotations sets, in a resource's annotations, what its claim reads
// (AnnotationReadsFrom) and the digest of the values read (AnnotationInputsDigest); it removes
// both for a claim that reads nothing.
func SetInputAnnotations(annotations map[string]string, claim *v1alpha1.InfraClaim) {
	from := ReadsFrom(claim)
	if from == "" {
		delete(annotations, v1alpha1.AnnotationReadsFrom)
		delete(annotations, v1alpha1.AnnotationInputsDigest)
		return
	}
	annotations[v1alpha1.AnnotationReadsFrom] = from
	if claim.Status.Inputs != nil && claim.Status.Inputs.Digest != "" {
		annotations[v1alpha1.AnnotationInputsDigest] = claim.Status.Inputs.Digest
	}
}

// RenderIdentities evaluates the class's importIdentities templates against the claim, for the
// resource named resource, as variables are (RenderVariables), and returns the import IDs by
// address; nil when the class has none. It returns a *render.Error when a template does not
// render, and an error when one renders to something other than a string. (Whether a template is
// unique per resource is the class's check, CheckClassIdentities.)
func RenderIdentities(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, resource string) (map[string]string, error) {
	if len(class.Spec.ImportIdentities) == 0 {
		return nil, nil
	}
	raw := make(map[string][]byte, len(class.Spec.ImportIdentities))
	for addr, tmpl := range class.Spec.ImportIdentities {
		b, err := json.Marshal(tmpl)
		if err != nil {
			return nil, err
		}
		raw[addr] = b
	}
	encoded, err := renderTemplates(claim, class, resource, raw)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(encoded))
	for addr, v := range encoded {
		var id string
		if err := json.Unmarshal(v, &id); err != nil {
			return nil, fmt.Errorf("importIdentities[%s] renders to %s, not a string", addr, v)
		}
		out[addr] = id
	}
	return out, nil
}

// renderTemplates evaluates templates (JSON values whose strings are HCL templates, by name)
// against the claim, the class and the resource's name, and returns each value as JSON.
func renderTemplates(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, resource string, raw map[string][]byte) (map[string][]byte, error) {
	tmpl, err := render.Compile(raw)
	if err != nil {
		return nil, err
	}
	spec, err := templateSpec(claim)
	if err != nil {
		return nil, err
	}
	ctx, err := render.Context(
		render.Claim{Name: claim.Name, Namespace: claim.Namespace, Labels: claim.Labels, Annotations: claim.Annotations, Spec: spec, Inputs: InputsJSON(claim)},
		render.Class{Name: class.Name, Capabilities: class.Spec.Capabilities},
		render.Resource{Name: resource},
	)
	if err != nil {
		return nil, fmt.Errorf("template context: %w", err)
	}
	values, err := tmpl.Render(ctx)
	if err != nil {
		return nil, err
	}
	return render.ToJSON(values)
}

// templateSpec is the claim's spec as templates see it: as the claim spells it, with the optional
// maps templates commonly read (parameters, requirements, resources.requests) present even when
// empty, so that lookup(claim.spec.parameters, "x", default) works on every claim.
func templateSpec(claim *v1alpha1.InfraClaim) ([]byte, error) {
	raw, err := json.Marshal(claim.Spec)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for _, k := range []string{"parameters", "requirements"} {
		if _, ok := m[k]; !ok {
			m[k] = map[string]any{}
		}
	}
	res, _ := m["resources"].(map[string]any)
	if res == nil {
		res = map[string]any{}
		m["resources"] = res
	}
	if _, ok := res["requests"]; !ok {
		res["requests"] = map[string]any{}
	}
	return json.Marshal(m)
}

func RawVariables(v v1alpha1.Variables) map[string][]byte {
	out := make(map[string][]byte, len(v))
	for k, j := range v {
		out[k] = j.Raw
	}
	return out
}

// RenderFor renders the class's variables and import identities against the claim for the
// provisioned resource res (whose name templates see as resource.name): what a new generation of
// the claim, or an upgrade to the class's module version, writes into the resource.
func RenderFor(claim *v1alpha1.InfraClaim, class *v1alpha1.InfraClass, res *v1alpha1.InfraResource) (v1alpha1.Variables, map[string]string, error) {
	vars, err := RenderVariables(claim, class, res.Name)
	if err != nil {
		return nil, nil, err
	}
	ids, err := RenderIdentities(claim, class, res.Name)
	if err != nil {
		return nil, nil, err
	}
	return vars, ids, nil
}
