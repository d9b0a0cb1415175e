package docs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// The API server's CEL limits (k8s.io/apiserver/pkg/apis/cel: PerCallLimit, RuntimeCELCostBudget).
const (
	celPerCallLimit = 1000000
	celCostBudget   = 10000000
)

// crdVersion validates objects of one served version of a CRD, as the API server does on create.
type crdVersion struct {
	kind       string
	namespaced bool
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	cel        *cel.Validator // nil when the schema has no x-kubernetes-validations
}

// loadCRDs reads every CRD of dir, keyed by group/version and kind.
func loadCRDs(dir string) (map[schema.GroupVersionKind]*crdVersion, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[schema.GroupVersionKind]*crdVersion{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		v1 := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, v1); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		crd := &apiextensions.CustomResourceDefinition{}
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, crd, nil); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, v := range crd.Spec.Versions {
			// The internal version keeps a schema common to every version in spec.validation.
			valid := v.Schema
			if valid == nil {
				valid = crd.Spec.Validation
			}
			if !v.Served || valid == nil || valid.OpenAPIV3Schema == nil {
				continue
			}
			props := valid.OpenAPIV3Schema
			s, err := structuralschema.NewStructural(props)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", f, v.Name, err)
			}
			val, _, err := validation.NewSchemaValidator(props)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", f, v.Name, err)
			}
			gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			out[gvk] = &crdVersion{
				kind: crd.Spec.Names.Kind, namespaced: crd.Spec.Scope == apiextensions.NamespaceScoped,
				structural: s, schema: val, cel: cel.NewValidator(s, true, celPerCallLimit),
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	return out, nil
}

// validate returns what the API server would refuse in obj (decoded as the API server decodes
// JSON: whole numbers as int64): object metadata, the OpenAPI schema, fields the schema does not
// declare (which the server would drop), and CEL rules.
func (c *crdVersion) validate(obj map[string]interface{}) []string {
	var problems []string
	if !c.namespaced {
		if ns, _, _ := unstructuredString(obj, "metadata", "namespace"); ns != "" {
			problems = append(problems, fmt.Sprintf("metadata.namespace: %s is cluster-scoped", c.kind))
		}
	}
	// As the API server's strategy for custom resources: the name a DNS subdomain; a namespace
	// only where the kind has one (kubectl fills it in when a snippet gives none).
	u := &unstructured.Unstructured{Object: obj}
	for _, e := range apivalidation.ValidateObjectMetaAccessor(u, c.namespaced && u.GetNamespace() != "", apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")) {
		problems = append(problems, e.Error())
	}
	for _, e := range objectmeta.Validate(context.Background(), nil, obj, c.structural, true) {
		problems = append(problems, e.Error())
	}
	for _, e := range validation.ValidateCustomResource(nil, obj, c.schema) {
		problems = append(problems, e.Error())
	}
	pruned := runtime.DeepCopyJSON(obj)
	unknown := pruning.PruneWithOptions(pruned, c.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, path := range unknown {
		problems = append(problems, fmt.Sprintf("%s: unknown field (the API server would drop it)", path))
	}
	if c.cel != nil {
		errs, _ := c.cel.Validate(context.Background(), nil, c.structural, obj, nil, celCostBudget)
		for _, e := range errs {
			problems = append(problems, e.Error())
		}
	}
	sort.Strings(problems)
	return problems
}

func unstructuredString(obj map[string]interface{}, path ...string) (string, bool, error) {
	var cur interface{} = obj
	for _, p := range path {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return "", false, nil
		}
		cur, ok = m[p]
		if !ok {
			return "", false, nil
		}
	}
	s, ok := cur.(string)
	if !ok {
		return "", true, fmt.Errorf("%s is not a string", strings.Join(path, "."))
	}
	return s, true, nil
}
