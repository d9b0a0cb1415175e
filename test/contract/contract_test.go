// Package contract_test checks the modules' contracts with hcl/v2, without providers or a cloud:
// their inputs and outputs parse, secrets are marked sensitive, and every sample class's template
// renders against the sample claims to values of the types the module declares.
package contract_test

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/controller/provision"
	"github.com/conductor-tf/conductor-tf/internal/render"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

func schema(t *testing.T, module string) *tfrunner.ModuleSchema {
	t.Helper()
	s, err := tfrunner.LoadModuleSchema(filepath.Join(harness.RepoRoot(), "modules", module))
	if err != nil {
		t.Fatalf("module %s: %v", module, err)
	}
	return s
}

func TestModuleContracts(t *testing.T) {
	cases := []struct {
		module    string
		required  []string
		outputs   []string
		sensitive []string
	}{
		{"rook-minio", []string{"name", "namespace", "storage_gib"}, []string{"access_key", "bucket", "endpoint", "namespace", "object_store", "secret_key"}, []string{"secret_key"}},
		// The master password is write-only: an ephemeral input, never an output.
		{"aws-rds", []string{"allocated_storage", "engine", "engine_version", "instance_class", "master_password", "master_password_version", "name", "subnet_ids", "vpc_id"},
			[]string{"endpoint", "port", "username"}, nil},
		{"gcs-bucket", []string{"name", "project"}, []string{"name", "self_link", "url"}, nil},
		// A sharing class's per-claim module: the server's outputs are its inputs.
		{"minio-bucket-user", []string{"admin_access_key", "admin_secret_key", "bucket", "endpoint", "namespace"},
			[]string{"access_key", "bucket", "endpoint", "secret_key"}, []string{"secret_key"}},
	}
	for _, tc := range cases {
		t.Run(tc.module, func(t *testing.T) {
			s := schema(t, tc.module)
			var required, outputs, sensitive []string
			for _, in := range s.Inputs {
				if in.Description == "" {
					t.Errorf("input %s has no description", in.Name)
				}
				if in.TypeExpr == "" {
					t.Errorf("input %s has no type", in.Name)
				}
				if in.Required {
					required = append(required, in.Name)
				}
			}
			for _, o := range s.Outputs {
				outputs = append(outputs, o.Name)
				if o.Sensitive {
					sensitive = append(sensitive, o.Name)
				}
			}
			for _, pair := range [][2][]string{{required, tc.required}, {outputs, tc.outputs}, {sensitive, tc.sensitive}} {
				if strings.Join(pair[0], ",") != strings.Join(pair[1], ",") {
					t.Errorf("got %v, want %v", pair[0], pair[1])
				}
			}
			for _, f := range []string{"versions.tf", "variables.tf", "outputs.tf", "README.md"} {
				if _, err := os.Stat(filepath.Join(harness.RepoRoot(), "modules", tc.module, f)); err != nil {
					t.Errorf("missing %s", f)
				}
			}
		})
	}
}

func samples(t *testing.T) ([]v1alpha1.InfraClass, []v1alpha1.InfraClaim) {
	t.Helper()
	s, err := harness.LoadSamples("")
	if err != nil {
		t.Fatal(err)
	}
	return s.Classes, s.Claims
}

// marksOwner reports whether a labels or tags variable of values carries the ownership mark
// (tfrunner.OwnershipMark or OwnershipMarkLabel) with the value resource.
func marksOwner(values map[string]cty.Value, resource string) bool {
	for _, name := range []string{"labels", "tags"} {
		v, ok := values[name]
		if !ok || v.IsNull() || !v.CanIterateElements() {
			continue
		}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			key := k.AsString()
			if (key == tfrunner.OwnershipMark || key == tfrunner.OwnershipMarkLabel) && e.Type() == cty.String && e.AsString() == resource {
				return true
			}
		}
	}
	return false
}

func TestSampleClassesRenderToDeclaredTypes(t *testing.T) {
	classes, claims := samples(t)
	if len(classes) < 4 || len(claims) < 4 {
		t.Fatalf("found %d classes and %d claims in config/samples", len(classes), len(claims))
	}
	rendered := map[string]map[string]cty.Value{} // class/claim -> values
	for _, class := range classes {
		module := class.Spec.Module.Source[strings.LastIndex(class.Spec.Module.Source, "/")+1:]
		s := schema(t, module)
		if !strings.HasPrefix(class.Spec.Module.Source, harness.SamplesRemote+"//modules/") || class.Spec.Module.Version != harness.ModulesVersion {
			t.Errorf("class %s: module %s@%s is not pinned in the samples' repository", class.Name, class.Spec.Module.Source, class.Spec.Module.Version)
		}
		if err := provision.CheckClassTemplate(&class, s); err != nil {
			t.Errorf("class %s: %v", class.Name, err)
		}
		matched := 0
		for _, claim := range claims {
			if claim.Spec.ResourceKind != class.Spec.ResourceKind {
				continue
			}
			matched++
			sampleInputs(t, &claim, classes, claims)
			class.Status.Inputs = nil
			for _, in := range s.Inputs {
				class.Status.Inputs = append(class.Status.Inputs, v1alpha1.ModuleInput{Name: in.Name, Required: in.Required, Sensitive: in.Sensitive})
			}
			vars, err := provision.RenderVariables(&claim, &class, provision.ResourceName(&claim))
			if err != nil {
				t.Errorf("class %s, claim %s: %v", class.Name, claim.Name, err)
				continue
			}
			values := map[string]cty.Value{}
			for name, v := range vars {
				ty, _ := ctyjson.ImpliedType(v.Raw)
				values[name], _ = ctyjson.Unmarshal(v.Raw, ty)
			}
			var fromSecrets []string
			from, err := provision.VariablesFrom(&claim, &class)
			if err != nil {
				t.Errorf("class %s, claim %s: %v", class.Name, claim.Name, err)
			}
			for _, in := range from {
				fromSecrets = append(fromSecrets, in.Name)
			}
			// Generated passwords come in at run time, with their versions (Unix seconds).
			for _, p := range class.Spec.GeneratedPasswords {
				fromSecrets = append(fromSecrets, p.Variable)
				if p.VersionVariable != "" {
					values[p.VersionVariable] = cty.NumberIntVal(1764432000)
				}
				if in, ok := s.Input(p.Variable); !ok || !in.Ephemeral {
					t.Errorf("class %s: generated password %s: the module's input is not ephemeral (declared: %v)", class.Name, p.Variable, ok)
				}
			}
			inputs := make([]render.Input, len(s.Inputs))
			for i, in := range s.Inputs {
				inputs[i] = render.Input{Name: in.Name, Type: in.Type, Defaults: in.Defaults, Required: in.Required}
			}
			for _, err := range render.Check(values, fromSecrets, inputs) {
				t.Errorf("class %s, claim %s: %v", class.Name, claim.Name, err)
			}
			rendered[class.Name+"/"+claim.Name] = values
			// Issue 46: a class whose creates are resolved by import identities has its module
			// mark every object with the resource's name, so that an adoption can be checked.
			if len(class.Spec.ImportIdentities) > 0 && !marksOwner(values, provision.ResourceName(&claim)) {
				t.Errorf("class %s, claim %s: import identities, but no labels or tags variable carries the ownership mark %s or %s = %s",
					class.Name, claim.Name, tfrunner.OwnershipMark, tfrunner.OwnershipMarkLabel, provision.ResourceName(&claim))
			}
		}
		if matched == 0 {
			t.Errorf("class %s has no sample claim of kind %s", class.Name, class.Spec.ResourceKind)
		}
	}
	// The templates turn requests into sizes as the samples say. (A sample claim has no UID: its
	// resource is named <claim>-e3b0c, after the SHA-256 of the empty UID.)
	want := map[string]map[string]string{
		"standard/wordpress-db":    {"allocated_storage": "25", "instance_class": `"db.t3.medium"`, "backup_window": `"02:00-03:00"`},
		"performance/analytics-db": {"allocated_storage": "960", "instance_class": `"db.r6g.2xlarge"`, "backup_window": `"03:00-04:00"`},
		"minio-standard/assets":    {"storage_gib": "8", "namespace": `"minio-assets-e3b0c"`, "bucket": `"assets"`},
		"minio-bucket/reports":     {"namespace": `"assets.namespace"`, "endpoint": `"assets.endpoint"`, "bucket": `"reports"`},
	}
	for key, vals := range want {
		got, ok := rendered[key]
		if !ok {
			t.Errorf("%s was not rendered (have %v)", key, keys(rendered))
			continue
		}
		for name, w := range vals {
			b, _ := ctyjson.Marshal(got[name], got[name].Type())
			if string(b) != w {
				t.Errorf("%s: %s = %s, want %s", key, name, b, w)
			}
		}
	}
}

// sampleInputs fills a sample claim's status.inputs as the claim controller would once the sample
// claims it reads are Ready: "<claim>.<output>" for a non-sensitive output, and for a sensitive one
// (as the upstream class's module declares it) a reference to the upstream's connection Secret.
func sampleInputs(t *testing.T, claim *v1alpha1.InfraClaim, classes []v1alpha1.InfraClass, claims []v1alpha1.InfraClaim) {
	t.Helper()
	if len(claim.Spec.ParametersFrom) == 0 {
		return
	}
	claim.Status.Inputs = &v1alpha1.ClaimInputs{}
	for _, p := range claim.Spec.ParametersFrom {
		var up *v1alpha1.InfraClaim
		for i := range claims {
			if claims[i].Name == p.Claim {
				up = &claims[i]
			}
		}
		if up == nil {
			t.Fatalf("claim %s reads claim %s, which is no sample", claim.Name, p.Claim)
		}
		var module string
		for _, c := range classes {
			if c.Spec.ResourceKind == up.Spec.ResourceKind && (c.Name == up.Spec.ClassName || (up.Spec.ClassName == "" && c.Spec.Default)) {
				module = c.Spec.Module.Source[strings.LastIndex(c.Spec.Module.Source, "/")+1:]
			}
		}
		read := v1alpha1.InputRead{Parameter: p.Parameter, Namespace: up.Namespace, Claim: up.Name, Output: p.Output}
		found := false
		for _, o := range schema(t, module).Outputs {
			if o.Name != p.Output {
				continue
			}
			found = true
			if o.Sensitive {
				read.Sensitive = true
				read.Secret = &v1alpha1.SecretKeySelector{Namespace: up.Namespace, Name: up.Spec.WriteConnectionSecretToRef.Name, Key: p.Output}
			} else {
				read.Value = &apiextensionsv1.JSON{Raw: []byte(strconv.Quote(up.Name + "." + p.Output))}
			}
		}
		if !found {
			t.Errorf("claim %s reads output %s of claim %s, which module %s does not declare", claim.Name, p.Output, p.Claim, module)
		}
		claim.Status.Inputs.Reads = append(claim.Status.Inputs.Reads, read)
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The sample classes' import identities (issue 35) name resources their modules declare, are unique
// per resource (issue 46: CheckClassIdentities), and render to IDs against every sample claim of
// their kind.
func TestSampleImportIdentities(t *testing.T) {
	samples, err := harness.LoadSamples("")
	if err != nil {
		t.Fatal(err)
	}
	for _, class := range samples.Classes {
		if len(class.Spec.ImportIdentities) == 0 {
			continue
		}
		module := class.Spec.Module.Source[strings.LastIndex(class.Spec.Module.Source, "/")+1:]
		files, _ := filepath.Glob(filepath.Join(harness.RepoRoot(), "modules", module, "*.tf"))
		var src strings.Builder
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
		if err := provision.CheckClassIdentities(&class); err != nil {
			t.Errorf("class %s: %v", class.Name, err)
		}
		for addr := range class.Spec.ImportIdentities {
			typ, name, _ := strings.Cut(strings.SplitN(addr, "[", 2)[0], ".")
			if !strings.Contains(src.String(), `resource "`+typ+`" "`+name+`"`) {
				t.Errorf("class %s: importIdentities names %s, which module %s does not declare", class.Name, addr, module)
			}
		}
		for _, claim := range samples.Claims {
			if claim.Spec.ResourceKind != class.Spec.ResourceKind {
				continue
			}
			ids, err := provision.RenderIdentities(&claim, &class, provision.ResourceName(&claim))
			if err != nil {
				t.Errorf("class %s, claim %s: %v", class.Name, claim.Name, err)
			}
			for addr, id := range ids {
				if id == "" || strings.Contains(id, "${") {
					t.Errorf("class %s, claim %s: %s renders to %q", class.Name, claim.Name, addr, id)
				}
			}
		}
	}
}
