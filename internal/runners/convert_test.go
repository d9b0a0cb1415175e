package runners

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/proto"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// wire sends m through the protocol's encoding and back.
func wire[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return out.(M)
}

func TestServiceName(t *testing.T) {
	if got := runnerpb.Runs_ServiceDesc.ServiceName; got != ServiceName {
		t.Fatalf("generated service %s, ServiceName %s", got, ServiceName)
	}
}

func TestSpecRoundTrip(t *testing.T) {
	in := tfrunner.Spec{
		Module: tfrunner.Module{Source: "registry.example/ns/name/aws", Version: "~> 1.2"},
		Backend: tfrunner.Backend{Type: "kubernetes", Config: map[string]cty.Value{
			"secret_suffix":     cty.StringVal("res-a"),
			"in_cluster_config": cty.True,
			"labels":            cty.MapVal(map[string]cty.Value{"a": cty.StringVal("1"), "b": cty.StringVal("")}),
			"empty_labels":      cty.MapValEmpty(cty.String),
		}},
		Variables: map[string]any{
			"s": "x", "n": 12345678901234567, "f": 1.5, "b": false, "null": nil,
			"o": map[string]any{"list": []any{1, "two", true, nil}, "m": map[string]string{"k": "v"}},
		},
		SensitiveVariables: map[string]string{"password": "hunter2"},
		EphemeralVariables: map[string]string{"master_password": "generated"},
		Env:                map[string]string{"TF_HTTP_ADDRESS": "http://127.0.0.1:1/state/x"},
		Kubeconfig:         []byte("apiVersion: v1\nkind: Config\n"),
		Tenant:             "team-a",
		Identity: &tfrunner.Identity{Token: []byte("eyJ.a.b"), Env: map[string]string{"AZURE_CLIENT_ID": "c"},
			TokenFileEnv: []string{"AZURE_FEDERATED_TOKEN_FILE", "ARM_OIDC_TOKEN_FILE_PATH"},
			Google:       &tfrunner.GoogleIdentity{Audience: "//iam.googleapis.com/x", ServiceAccountEmail: "a@b.iam.gserviceaccount.com"}},
		SourceCredentials: &tfrunner.SourceCredentials{RegistryTokens: map[string]string{"TF_TOKEN_example_com": "t"},
			GitCredentials: []byte("https://u:p@example.com\n"), SSHPrivateKey: []byte("k")},
	}
	p, err := specToProto(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := specFromProto(wire(t, &runnerpb.RunSpec{Spec: p}).GetSpec())
	if err != nil {
		t.Fatal(err)
	}

	if out.Module != in.Module || out.Backend.Type != in.Backend.Type || out.Tenant != in.Tenant ||
		!reflect.DeepEqual(out.SensitiveVariables, in.SensitiveVariables) || !reflect.DeepEqual(out.EphemeralVariables, in.EphemeralVariables) || !reflect.DeepEqual(out.Env, in.Env) ||
		string(out.Kubeconfig) != string(in.Kubeconfig) || !reflect.DeepEqual(out.Identity, in.Identity) ||
		!reflect.DeepEqual(out.SourceCredentials, in.SourceCredentials) {
		t.Fatalf("spec %+v, want %+v", out, in)
	}
	if len(out.Backend.Config) != len(in.Backend.Config) {
		t.Fatalf("backend %v, want %v", out.Backend.Config, in.Backend.Config)
	}
	for k, v := range in.Backend.Config {
		if !out.Backend.Config[k].RawEquals(v) {
			t.Errorf("backend attribute %s = %#v, want %#v", k, out.Backend.Config[k], v)
		}
	}
	// Variables arrive as the JSON the manager encoded: Terraform's .tfvars.json gets the same.
	want, _ := json.Marshal(in.Variables)
	got, err := json.Marshal(out.Variables)
	if err != nil || string(got) != string(want) {
		t.Fatalf("variables %s (%v), want %s", got, err, want)
	}

	// RunnerPool and RunID stay behind; nil maps stay nil.
	in = tfrunner.Spec{Module: in.Module, RunnerPool: "p", RunID: "run-1"}
	if p, err = specToProto(in); err != nil {
		t.Fatal(err)
	}
	if out, err = specFromProto(wire(t, &runnerpb.RunSpec{Spec: p}).GetSpec()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, tfrunner.Spec{Module: in.Module}) {
		t.Fatalf("spec %+v", out)
	}
}

func TestSpecThatDoesNotConvert(t *testing.T) {
	for name, s := range map[string]tfrunner.Spec{
		"number attribute": {Backend: tfrunner.Backend{Config: map[string]cty.Value{"n": cty.NumberIntVal(1)}}},
		"null attribute":   {Backend: tfrunner.Backend{Config: map[string]cty.Value{"n": cty.NullVal(cty.String)}}},
		"list attribute":   {Backend: tfrunner.Backend{Config: map[string]cty.Value{"l": cty.ListVal([]cty.Value{cty.StringVal("x")})}}},
		"channel variable": {Variables: map[string]any{"c": make(chan int)}},
	} {
		if _, err := specToProto(s); err == nil {
			t.Errorf("%s: converted", name)
		}
	}
	bad := &runnerpb.Spec{Variables: map[string][]byte{"v": []byte("{")}}
	if _, err := specFromProto(bad); err == nil {
		t.Error("invalid JSON variable converted")
	}
	bad = &runnerpb.Spec{Backend: &runnerpb.Backend{Config: map[string]*runnerpb.BackendValue{"x": {}}}}
	if _, err := specFromProto(bad); err == nil {
		t.Error("unset backend value converted")
	}
}

func TestImportsRoundTrip(t *testing.T) {
	in := []tfrunner.ImportTarget{{Address: "x.a", ID: "1"}, {Address: "x.b", ID: "2"}}
	rs := wire(t, &runnerpb.RunSpec{Imports: importsToProto(in)})
	if out := importsFromProto(rs.GetImports()); !reflect.DeepEqual(out, in) {
		t.Fatalf("imports %+v", out)
	}
}

// loadSchema is the schema of a module declaring a few inputs and outputs, as a runner reads it.
func loadSchema(t *testing.T) *tfrunner.ModuleSchema {
	t.Helper()
	dir := t.TempDir()
	src := `
variable "any" {}
variable "name" {
  type        = string
  description = "the name"
}
variable "password" {
  type      = string
  sensitive = true
  default   = null
}
variable "settings" {
  type = object({
    size  = optional(number, 3)
    tags  = optional(map(string), { team = "a" })
    inner = optional(object({ on = optional(bool, true) }), {})
  })
}
output "url" { value = "x" }
output "secret" {
  value     = "y"
  sensitive = true
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := tfrunner.LoadModuleSchema(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Version = "1.2.3"
	return s
}

func TestSchemaRoundTrip(t *testing.T) {
	in := loadSchema(t)
	msg := wire(t, &runnerpb.RunnerMessage{Message: &runnerpb.RunnerMessage_Result{Result: &runnerpb.Result{Apply: &runnerpb.ApplyResult{Schema: schemaToProto(in)}}}})
	out, err := schemaFromProto(msg.GetResult().GetApply().GetSchema())
	if err != nil {
		t.Fatal(err)
	}
	// Types and the defaults of optional attributes included: the manager's class check fills them in.
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("schema\n%#v\nwant\n%#v", out, in)
	}
	settings, _ := out.Input("settings")
	v := settings.Defaults.Apply(cty.ObjectVal(map[string]cty.Value{"size": cty.NullVal(cty.Number)}))
	if !v.GetAttr("size").RawEquals(cty.NumberIntVal(3)) {
		t.Fatalf("defaults applied: %#v", v)
	}
	if s, err := schemaFromProto(nil); s != nil || err != nil {
		t.Fatalf("nil schema: %v, %v", s, err)
	}
	bad := &runnerpb.ModuleSchema{Inputs: []*runnerpb.Input{{Name: "x", TypeExpr: "list("}}}
	if _, err := schemaFromProto(bad); err == nil {
		t.Fatal("a type that does not parse converted")
	}
}

func TestResultRoundTrip(t *testing.T) {
	plan := &tfjson.Plan{HasChanges: true, Summary: tfjson.Summary{Add: 2, Change: 1, Destroy: 1, Import: 1}, ID: "0123456789ab",
		Changes: []tfjson.Change{
			{Address: "module.main.a.b", Actions: []string{"create"}},
			{Address: "module.main.c.d", Actions: []string{"delete", "create"}},
			{Address: "module.main.e.f", Actions: []string{"update"}, Importing: true},
		}}
	outputs := map[string]tfjson.Output{
		"url":    {Value: json.RawMessage(`"https://x"`)},
		"obj":    {Value: json.RawMessage(`{"a":[1,2.5,null]}`)},
		"secret": {Value: json.RawMessage(`"s3cr3t"`), Sensitive: true},
	}
	importErr := &tfrunner.RunError{Op: "import", Message: "Error: Cannot import non-existent remote object", Err: errors.New("exit status 1")}
	apply := &tfrunner.ApplyResult{
		Initialized: true, Schema: loadSchema(t), Plan: plan, Applied: true, Outputs: outputs, Log: "Apply complete!\n",
		Imports: []tfrunner.ImportResult{
			{Address: "module.main.e.f", ID: "id-1", Imported: true},
			{Address: "module.main.g.h", ID: "id-2", Err: importErr},
			{Address: "module.main.i.j", ID: "id-3"},
		},
		Ended: []string{"module.main.e.f", "module.main.k.l"},
	}
	applied := tfjson.Summary{Add: 1}
	drift := &tfjson.StreamResult{Plan: &tfjson.Plan{ID: "ba9876543210", Destroy: true}, Applied: &applied,
		Outputs: map[string]tfjson.Output{"secret": {Sensitive: true}, "url": {Value: json.RawMessage(`"u"`)}},
		Drift:   []string{"module.main.a.b"}, Errors: []string{"Error: x: y"}, Log: []string{"one", "two"}, OutputsChanged: true}

	for name, c := range map[string]struct {
		apply *tfrunner.ApplyResult
		drift *tfjson.StreamResult
	}{
		"apply":         {apply: apply},
		"empty apply":   {apply: &tfrunner.ApplyResult{}},
		"drift check":   {drift: drift},
		"empty drift":   {drift: &tfjson.StreamResult{}},
		"destroy (nil)": {},
	} {
		res := wire(t, newResult(c.apply, c.drift, nil))
		gotApply, err := applyResultFromProto(res.GetApply())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantApply := c.apply
		if wantApply == nil {
			wantApply = &tfrunner.ApplyResult{}
		}
		// Import errors by index, by kind.
		for i, imp := range wantApply.Imports {
			got := gotApply.Imports[i].Err
			if (imp.Err == nil) != (got == nil) {
				t.Fatalf("%s: import %d error %v, want %v", name, i, got, imp.Err)
			}
			var re *tfrunner.RunError
			if imp.Err != nil && (!errors.As(got, &re) || re.Op != "import" || re.Message != importErr.Message) {
				t.Fatalf("%s: import %d error %#v", name, i, got)
			}
		}
		if !reflect.DeepEqual(withoutImportErrors(gotApply), withoutImportErrors(wantApply)) {
			t.Fatalf("%s: apply\n%#v\nwant\n%#v", name, gotApply, wantApply)
		}
		if got := streamResultFromProto(res.GetDrift()); !reflect.DeepEqual(got, c.drift) {
			t.Fatalf("%s: drift\n%#v\nwant\n%#v", name, got, c.drift)
		}
		if res.GetError() != nil || res.ErroredState != nil {
			t.Fatalf("%s: error %v, errored state %q", name, res.GetError(), res.ErroredState)
		}
	}

	// An errored state is carried even when empty.
	res := newResult(nil, nil, nil)
	res.ErroredState = []byte{}
	if got := wire(t, res).ErroredState; got == nil {
		t.Fatal("an empty errored state was lost")
	}
}

func withoutImportErrors(r *tfrunner.ApplyResult) *tfrunner.ApplyResult {
	c := *r
	c.Imports = nil
	for _, imp := range r.Imports {
		imp.Err = nil
		c.Imports = append(c.Imports, imp)
	}
	return &c
}

type hookRefusal struct{}

func (hookRefusal) Error() string { return "refused" }

func TestErrorRoundTrip(t *testing.T) {
	lock := &tfrunner.LockError{ID: "l1", Who: "x@y", Operation: "OperationTypeApply", Created: "2026-01-02 03:04:05", Op: "apply"}
	runErr := &tfrunner.RunError{Op: "apply", Message: "Error: boom", Err: errors.New("exit status 1")}
	killedRun := &tfrunner.RunError{Op: "apply", Message: "signal: killed", Err: fmt.Errorf("lost: %w", tfrunner.ErrProcessLost)}
	for _, c := range []struct {
		name    string
		err     error
		hookErr error
		kind    runnerpb.ErrorKind
		check   func(error) bool
	}{
		{"nil", nil, nil, 0, func(err error) bool { return err == nil }},
		{"run", fmt.Errorf("applying: %w", runErr), nil, runnerpb.ErrorKind_ERROR_KIND_RUN, func(err error) bool {
			var re *tfrunner.RunError
			return errors.As(err, &re) && re.Op == runErr.Op && re.Message == runErr.Message && !tfrunner.Killed(err) &&
				errors.Unwrap(re).Error() == "applying: terraform apply: Error: boom"
		}},
		{"killed run", killedRun, nil, runnerpb.ErrorKind_ERROR_KIND_RUN, func(err error) bool {
			var re *tfrunner.RunError
			return errors.As(err, &re) && re.Op == "apply" && tfrunner.Killed(err) && errors.Is(err, tfrunner.ErrProcessLost)
		}},
		{"lock", fmt.Errorf("wrapped: %w", lock), nil, runnerpb.ErrorKind_ERROR_KIND_LOCK, func(err error) bool {
			var le *tfrunner.LockError
			return errors.As(err, &le) && *le == *lock
		}},
		{"stopped, the manager's hook error", fmt.Errorf("%w: refused", tfrunner.ErrStopped), hookRefusal{},
			runnerpb.ErrorKind_ERROR_KIND_STOPPED, func(err error) bool {
				var h hookRefusal
				return errors.Is(err, tfrunner.ErrStopped) && errors.As(err, &h)
			}},
		{"stopped, no hook error", fmt.Errorf("%w: refused", tfrunner.ErrStopped), nil, runnerpb.ErrorKind_ERROR_KIND_STOPPED,
			func(err error) bool {
				return errors.Is(err, tfrunner.ErrStopped) && err.Error() == "run stopped: run stopped: refused"
			}},
		{"cancelled", fmt.Errorf("plan: %w", context.Canceled), nil, runnerpb.ErrorKind_ERROR_KIND_CANCELLED, func(err error) bool {
			return errors.Is(err, context.Canceled) && !tfrunner.Killed(err) && err.Error() == "plan: context canceled: context canceled"
		}},
		{"cancelled and killed", errors.Join(context.Canceled, tfrunner.ErrProcessLost), nil, runnerpb.ErrorKind_ERROR_KIND_CANCELLED,
			func(err error) bool {
				return errors.Is(err, context.Canceled) && tfrunner.Killed(err)
			}},
		{"killed, other", fmt.Errorf("runner: %w", tfrunner.ErrProcessLost), nil, runnerpb.ErrorKind_ERROR_KIND_UNSPECIFIED,
			func(err error) bool {
				return tfrunner.Killed(err) && err.Error() == "runner: the run's process was lost: the run's process was lost"
			}},
		{"other", errors.New("boom"), nil, runnerpb.ErrorKind_ERROR_KIND_UNSPECIFIED, func(err error) bool {
			return err.Error() == "boom" && !tfrunner.Killed(err)
		}},
	} {
		res := wire(t, newResult(nil, nil, c.err))
		if got := res.GetError().GetKind(); got != c.kind {
			t.Errorf("%s: kind %v, want %v", c.name, got, c.kind)
		}
		if got := errorFromProto(res.GetError(), c.hookErr); !c.check(got) {
			t.Errorf("%s: decoded %#v (%v)", c.name, got, got)
		}
	}
}
