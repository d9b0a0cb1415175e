package runners

// Conversions between package tfrunner's types and the run protocol's messages (runnerpb, from
// proto/conductor/runner/v1/runner.proto). Empty lists and maps arrive as nil.

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/conductor-tf/conductor-tf/internal/runners/runnerpb"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// opName is an Operation as logs name it: apply, destroy or drift-check.
func opName(op runnerpb.Operation) string {
	switch op {
	case runnerpb.Operation_OPERATION_APPLY:
		return "apply"
	case runnerpb.Operation_OPERATION_DESTROY:
		return "destroy"
	case runnerpb.Operation_OPERATION_DRIFT_CHECK:
		return "drift-check"
	}
	return op.String()
}

// specToProto converts a Spec for the stream (RunnerPool, RunID and ColdProviders stay behind:
// runners keep no warm providers). It fails when a variable does not encode to JSON or a backend
// attribute is not a string, a bool or a map(string).
func specToProto(s tfrunner.Spec) (*runnerpb.Spec, error) {
	p := &runnerpb.Spec{
		Module:             &runnerpb.Module{Source: s.Module.Source, Version: s.Module.Version},
		Backend:            &runnerpb.Backend{Type: s.Backend.Type},
		SensitiveVariables: cloneMap(s.SensitiveVariables),
		EphemeralVariables: cloneMap(s.EphemeralVariables),
		Env:                cloneMap(s.Env),
		Kubeconfig:         s.Kubeconfig,
		Tenant:             s.Tenant,
		Identity:           identityToProto(s.Identity),
	}
	if c := s.SourceCredentials; c != nil {
		p.SourceCredentials = &runnerpb.SourceCredentials{RegistryTokens: cloneMap(c.RegistryTokens),
			GitCredentials: c.GitCredentials, SshPrivateKey: c.SSHPrivateKey, KnownHosts: c.KnownHosts}
	}
	for k, v := range s.Backend.Config {
		bv, err := backendValueToProto(v)
		if err != nil {
			return nil, fmt.Errorf("backend attribute %s: %w", k, err)
		}
		if p.Backend.Config == nil {
			p.Backend.Config = map[string]*runnerpb.BackendValue{}
		}
		p.Backend.Config[k] = bv
	}
	for k, v := range s.Variables {
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", k, err)
		}
		if p.Variables == nil {
			p.Variables = map[string][]byte{}
		}
		p.Variables[k] = data
	}
	return p, nil
}

// specFromProto converts a received Spec back. Variables come back as json.RawMessage, the JSON
// the manager encoded; it fails when one is not valid JSON or a backend value is unset.
func specFromProto(p *runnerpb.Spec) (tfrunner.Spec, error) {
	s := tfrunner.Spec{
		Module:             tfrunner.Module{Source: p.GetModule().GetSource(), Version: p.GetModule().GetVersion()},
		Backend:            tfrunner.Backend{Type: p.GetBackend().GetType()},
		SensitiveVariables: cloneMap(p.GetSensitiveVariables()),
		EphemeralVariables: cloneMap(p.GetEphemeralVariables()),
		Env:                cloneMap(p.GetEnv()),
		Kubeconfig:         nilIfEmpty(p.GetKubeconfig()),
		Tenant:             p.GetTenant(),
		Identity:           identityFromProto(p.GetIdentity()),
	}
	if c := p.GetSourceCredentials(); c != nil {
		s.SourceCredentials = &tfrunner.SourceCredentials{RegistryTokens: cloneMap(c.GetRegistryTokens()),
			GitCredentials: nilIfEmpty(c.GetGitCredentials()), SSHPrivateKey: nilIfEmpty(c.GetSshPrivateKey()), KnownHosts: nilIfEmpty(c.GetKnownHosts())}
	}
	for k, bv := range p.GetBackend().GetConfig() {
		v, err := backendValueFromProto(bv)
		if err != nil {
			return tfrunner.Spec{}, fmt.Errorf("backend attribute %s: %w", k, err)
		}
		if s.Backend.Config == nil {
			s.Backend.Config = map[string]cty.Value{}
		}
		s.Backend.Config[k] = v
	}
	for k, data := range p.GetVariables() {
		if !json.Valid(data) {
			return tfrunner.Spec{}, fmt.Errorf("variable %s: not a JSON value", k)
		}
		if s.Variables == nil {
			s.Variables = map[string]any{}
		}
		s.Variables[k] = json.RawMessage(data)
	}
	return s, nil
}

func backendValueToProto(v cty.Value) (*runnerpb.BackendValue, error) {
	if v.IsNull() || !v.IsWhollyKnown() {
		return nil, errors.New("null or unknown value")
	}
	switch ty := v.Type(); {
	case ty == cty.String:
		return &runnerpb.BackendValue{Value: &runnerpb.BackendValue_StringValue{StringValue: v.AsString()}}, nil
	case ty == cty.Bool:
		return &runnerpb.BackendValue{Value: &runnerpb.BackendValue_BoolValue{BoolValue: v.True()}}, nil
	case ty.IsMapType() && ty.ElementType() == cty.String:
		m := &runnerpb.StringMap{Entries: map[string]string{}}
		for k, e := range v.AsValueMap() {
			if e.IsNull() {
				return nil, fmt.Errorf("key %s: null value", k)
			}
			m.Entries[k] = e.AsString()
		}
		return &runnerpb.BackendValue{Value: &runnerpb.BackendValue_StringMap{StringMap: m}}, nil
	default:
		return nil, fmt.Errorf("a %s, not a string, bool or map(string)", ty.FriendlyName())
	}
}

func backendValueFromProto(bv *runnerpb.BackendValue) (cty.Value, error) {
	switch v := bv.GetValue().(type) {
	case *runnerpb.BackendValue_StringValue:
		return cty.StringVal(v.StringValue), nil
	case *runnerpb.BackendValue_BoolValue:
		return cty.BoolVal(v.BoolValue), nil
	case *runnerpb.BackendValue_StringMap:
		if len(v.StringMap.GetEntries()) == 0 {
			return cty.MapValEmpty(cty.String), nil
		}
		m := make(map[string]cty.Value, len(v.StringMap.GetEntries()))
		for k, e := range v.StringMap.GetEntries() {
			m[k] = cty.StringVal(e)
		}
		return cty.MapVal(m), nil
	}
	return cty.NilVal, errors.New("no value")
}

func importsToProto(in []tfrunner.ImportTarget) []*runnerpb.ImportTarget {
	var out []*runnerpb.ImportTarget
	for _, t := range in {
		out = append(out, &runnerpb.ImportTarget{Address: t.Address, Id: t.ID})
	}
	return out
}

func importsFromProto(in []*runnerpb.ImportTarget) []tfrunner.ImportTarget {
	var out []tfrunner.ImportTarget
	for _, t := range in {
		out = append(out, tfrunner.ImportTarget{Address: t.GetAddress(), ID: t.GetId()})
	}
	return out
}

func schemaToProto(s *tfrunner.ModuleSchema) *runnerpb.ModuleSchema {
	if s == nil {
		return nil
	}
	p := &runnerpb.ModuleSchema{Version: s.Version}
	for _, in := range s.Inputs {
		p.Inputs = append(p.Inputs, &runnerpb.Input{Name: in.Name, TypeExpr: in.TypeExpr, Required: in.Required,
			Sensitive: in.Sensitive, Description: in.Description})
	}
	for _, o := range s.Outputs {
		p.Outputs = append(p.Outputs, &runnerpb.ModuleOutput{Name: o.Name, Sensitive: o.Sensitive, Description: o.Description})
	}
	return p
}

// schemaFromProto converts a received ModuleSchema back, parsing each input's type constraint as
// tfrunner.LoadModuleSchema does; it fails when one does not parse.
func schemaFromProto(p *runnerpb.ModuleSchema) (*tfrunner.ModuleSchema, error) {
	if p == nil {
		return nil, nil
	}
	s := &tfrunner.ModuleSchema{Version: p.GetVersion()}
	for _, in := range p.GetInputs() {
		ty, defaults, err := parseTypeExpr(in.GetTypeExpr())
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", in.GetName(), err)
		}
		s.Inputs = append(s.Inputs, tfrunner.Input{Name: in.GetName(), TypeExpr: in.GetTypeExpr(), Type: ty, Defaults: defaults,
			Required: in.GetRequired(), Sensitive: in.GetSensitive(), Description: in.GetDescription()})
	}
	for _, o := range p.GetOutputs() {
		s.Outputs = append(s.Outputs, tfrunner.ModuleOutput{Name: o.GetName(), Sensitive: o.GetSensitive(), Description: o.GetDescription()})
	}
	return s, nil
}

// parseTypeExpr is a variable's type constraint and its optional attributes' defaults, as
// tfrunner.LoadModuleSchema reads them: cty.DynamicPseudoType and no defaults when expr is empty.
func parseTypeExpr(expr string) (cty.Type, *typeexpr.Defaults, error) {
	if expr == "" {
		return cty.DynamicPseudoType, nil, nil
	}
	e, diags := hclsyntax.ParseExpression([]byte(expr), "", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilType, nil, fmt.Errorf("type %q: %s", expr, diags.Error())
	}
	ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(e)
	if diags.HasErrors() {
		return cty.NilType, nil, fmt.Errorf("type %q: %s", expr, diags.Error())
	}
	return ty, defaults, nil
}
