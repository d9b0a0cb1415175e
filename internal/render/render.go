// Package render evaluates a class's variables template against a claim, and checks the result
// against the module's declared inputs.
//
// Each string value of a class's variables is an HCL template expression (hcl/v2 hclsyntax),
// evaluated with go-cty against four variables: `claim` (name, namespace, labels, annotations,
// and spec exactly as the claim spells it), `class` (name, spec.capabilities), `resource`
// (name: the InfraResource rendered for, unique in the cluster) and `inputs` (the non-sensitive
// values the claim reads from other claims' outputs, by parameter). Functions are go-cty's
// standard library plus gibibytes(), mebibytes() and bytes() for Kubernetes quantities. A template
// that is a single interpolation ("${gibibytes(...)}") keeps its type; other values pass through
// typed. Results are cty values; they reach Terraform as JSON, never as HCL source.
package render

import (
	"errors"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Error is a template or variable that cannot be rendered or does not fit the module. Name is the
// variable concerned.
type Error struct {
	Name    string
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("variable %q: %s", e.Name, e.Message) }

// Template is a compiled variables template. Build one with Compile.
type Template struct {
	exprs  map[string]hcl.Expression
	static map[string]cty.Value
}

// Compile parses a class's variables: each value is JSON; every JSON string in it, at any depth of
// objects and arrays, is parsed as an HCL template (compileValue), and a value without strings is
// decoded as a typed constant. It returns an *Error naming the first variable (in name order) that
// does not parse or refers to something other than claim, class and resource.
func Compile(vars map[string][]byte) (*Template, error) {
	t := &Template{exprs: map[string]hcl.Expression{}, static: map[string]cty.Value{}}
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		raw := vars[name]
		if hasString(raw) {
			expr, err := compileValue(name, raw)
			if err != nil {
				return nil, err
			}
			t.exprs[name] = expr
			continue
		}
		v, err := decodeJSON(raw)
		if err != nil {
			return nil, &Error{Name: name, Message: err.Error()}
		}
		t.static[name] = v
	}
	return t, nil
}

// unknownFunction returns the name of the first function the expression calls that Functions()
// does not define, or "" when every call is to a known function. HCL itself reports an unknown
// function only when the call is evaluated, which for a class is at provisioning time.
func unknownFunction(expr hclsyntax.Expression) string {
	known := Functions()
	var unknown string
	hclsyntax.VisitAll(expr, func(n hclsyntax.Node) hcl.Diagnostics {
		if call, ok := n.(*hclsyntax.FunctionCallExpr); ok && unknown == "" {
			if _, ok := known[call.Name]; !ok {
				unknown = call.Name
			}
		}
		return nil
	})
	return unknown
}

// Names lists the variables the template sets, sorted.
func (t *Template) Names() []string {
	names := make([]string, 0, len(t.exprs)+len(t.static))
	for n := range t.exprs {
		names = append(names, n)
	}
	for n := range t.static {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Claim is what templates see as `claim`.
type Claim struct {
	Name, Namespace     string
	Labels, Annotations map[string]string
	// Spec is the claim's spec as JSON.
	Spec []byte
	// Inputs is a JSON object of the non-sensitive values the claim reads from other claims'
	// outputs (spec.parametersFrom), by parameter: templates see it as `inputs`. Empty: {}.
	Inputs []byte
}

// Class is what templates see as `class`.
type Class struct {
	Name         string
	Capabilities map[string]string
}

// Resource is what templates see as `resource`: the resource the claim's template renders for.
type Resource struct {
	// Name is the InfraResource's name: unique in the cluster, and for a provisioned resource
	// derived from its claim's UID (never the same for two claims, even of one name over time).
	Name string
}

// Context builds the evaluation context for a claim, its class and the resource rendered for.
func Context(claim Claim, class Class, res Resource) (*hcl.EvalContext, error) {
	spec := cty.EmptyObjectVal
	if len(claim.Spec) > 0 {
		v, err := decodeJSON(claim.Spec)
		if err != nil {
			return nil, fmt.Errorf("claim spec: %w", err)
		}
		spec = v
	}
	inputs := cty.EmptyObjectVal
	if len(claim.Inputs) > 0 {
		v, err := decodeJSON(claim.Inputs)
		if err != nil {
			return nil, fmt.Errorf("claim inputs: %w", err)
		}
		inputs = v
	}
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"claim": cty.ObjectVal(map[string]cty.Value{
				"name":        cty.StringVal(claim.Name),
				"namespace":   cty.StringVal(claim.Namespace),
				"labels":      stringMap(claim.Labels),
				"annotations": stringMap(claim.Annotations),
				"spec":        spec,
			}),
			"class": cty.ObjectVal(map[string]cty.Value{
				"name": cty.StringVal(class.Name),
				"spec": cty.ObjectVal(map[string]cty.Value{"capabilities": stringMap(class.Capabilities)}),
			}),
			"resource": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(res.Name)}),
			"inputs":   inputs,
		},
		Functions: Functions(),
	}, nil
}

// Render evaluates every variable. It returns an *Error naming the first variable (in name order)
// whose template fails, e.g. one that reads an attribute the claim does not have.
func (t *Template) Render(ctx *hcl.EvalContext) (map[string]cty.Value, error) {
	out := make(map[string]cty.Value, len(t.exprs)+len(t.static))
	for name, v := range t.static {
		out[name] = v
	}
	for _, name := range slices.Sorted(maps.Keys(t.exprs)) {
		v, diags := t.exprs[name].Value(ctx)
		if diags.HasErrors() {
			return nil, &Error{Name: name, Message: diagText(diags)}
		}
		if !v.IsWhollyKnown() {
			return nil, &Error{Name: name, Message: "value is not known"}
		}
		out[name] = v
	}
	return out, nil
}

// Partial evaluates one variable where parts of the context may be unknown (cty.DynamicVal): the
// result is known when the template does not depend on them, else an unknown value of the type HCL
// infers (cty.DynamicVal when it cannot). Evaluation errors yield cty.DynamicVal: Partial is for
// checking types ahead of time, and a real evaluation reports them.
func (t *Template) Partial(ctx *hcl.EvalContext, name string) cty.Value {
	if v, ok := t.static[name]; ok {
		return v
	}
	expr, ok := t.exprs[name]
	if !ok {
		return cty.DynamicVal
	}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		return cty.DynamicVal
	}
	return v
}

// ToJSON encodes rendered values as JSON documents, one per variable.
func ToJSON(values map[string]cty.Value) (map[string][]byte, error) {
	out := make(map[string][]byte, len(values))
	for name, v := range values {
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return nil, &Error{Name: name, Message: err.Error()}
		}
		out[name] = b
	}
	return out, nil
}

// Input is a module input variable as Check needs it.
type Input struct {
	Name string
	// Type is the input's type constraint, optional object attributes included.
	Type cty.Type
	// Defaults are the defaults of its optional(T, default) attributes; nil when none.
	Defaults *typeexpr.Defaults
	Required bool
}

// Check compares a variable set with the module's inputs: every name must be a declared input,
// every value must convert to the input's type once the defaults of its optional attributes are
// filled in (Terraform's order: Defaults.Apply, then convert), and every required input must be set
// (by values or by one of also, the names set from Secrets). It returns every problem found,
// sorted, as *Errors.
func Check(values map[string]cty.Value, also []string, inputs []Input) []error {
	declared := make(map[string]Input, len(inputs))
	for _, in := range inputs {
		declared[in.Name] = in
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(values)) {
		in, ok := declared[name]
		if !ok {
			errs = append(errs, &Error{Name: name, Message: "the module declares no such input"})
			continue
		}
		v := values[name]
		if in.Defaults != nil {
			v = in.Defaults.Apply(v)
		}
		if _, err := convert.Convert(v, in.Type); err != nil {
			errs = append(errs, &Error{Name: name, Message: fmt.Sprintf("value of type %s does not fit the input's type %s: %s",
				values[name].Type().FriendlyName(), in.Type.FriendlyName(), pathMessage(err))})
		}
	}
	set := map[string]bool{}
	for _, n := range also {
		set[n] = true
		if _, ok := declared[n]; !ok {
			errs = append(errs, &Error{Name: n, Message: "the module declares no such input"})
		}
		if _, ok := values[n]; ok {
			errs = append(errs, &Error{Name: n, Message: "set twice: in variables and from a Secret"})
		}
	}
	for _, in := range inputs {
		if _, ok := values[in.Name]; in.Required && !ok && !set[in.Name] {
			errs = append(errs, &Error{Name: in.Name, Message: "required input is not set"})
		}
	}
	return errs
}

// pathMessage is a conversion error prefixed with where in the value it is (".backup.enabled",
// "[0].port"), as cty.PathError records it.
func pathMessage(err error) string {
	var pe cty.PathError
	if !errors.As(err, &pe) || len(pe.Path) == 0 {
		return err.Error()
	}
	var b strings.Builder
	for _, step := range pe.Path {
		switch s := step.(type) {
		case cty.GetAttrStep:
			b.WriteString("." + s.Name)
		case cty.IndexStep:
			if s.Key.Type() == cty.String {
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			} else if s.Key.Type() == cty.Number {
				b.WriteString("[" + s.Key.AsBigFloat().Text('f', -1) + "]")
			}
		}
	}
	return b.String() + ": " + err.Error()
}

// Functions are the functions templates may call: go-cty's standard library under Terraform's
// names, plus gibibytes, mebibytes and bytes, which take a Kubernetes quantity ("25Gi", "512Mi",
// "1G") and return a number of GiB, MiB or bytes.
func Functions() map[string]function.Function {
	return map[string]function.Function{
		"abs": stdlib.AbsoluteFunc, "ceil": stdlib.CeilFunc, "floor": stdlib.FloorFunc,
		"max": stdlib.MaxFunc, "min": stdlib.MinFunc, "parseint": stdlib.ParseIntFunc,
		"lower": stdlib.LowerFunc, "upper": stdlib.UpperFunc, "title": stdlib.TitleFunc,
		"trimspace": stdlib.TrimSpaceFunc, "trim": stdlib.TrimFunc, "trimprefix": stdlib.TrimPrefixFunc,
		"trimsuffix": stdlib.TrimSuffixFunc, "substr": stdlib.SubstrFunc, "replace": stdlib.ReplaceFunc,
		"regex": stdlib.RegexFunc, "regexall": stdlib.RegexAllFunc, "split": stdlib.SplitFunc,
		"join": stdlib.JoinFunc, "format": stdlib.FormatFunc, "formatlist": stdlib.FormatListFunc,
		"length": stdlib.LengthFunc, "concat": stdlib.ConcatFunc, "contains": stdlib.ContainsFunc,
		"coalesce": stdlib.CoalesceFunc, "compact": stdlib.CompactFunc, "distinct": stdlib.DistinctFunc,
		"flatten": stdlib.FlattenFunc, "keys": stdlib.KeysFunc, "values": stdlib.ValuesFunc,
		"lookup": stdlib.LookupFunc, "merge": stdlib.MergeFunc, "element": stdlib.ElementFunc,
		"reverse": stdlib.ReverseListFunc, "sort": stdlib.SortFunc, "range": stdlib.RangeFunc,
		"jsonencode": stdlib.JSONEncodeFunc, "jsondecode": stdlib.JSONDecodeFunc,
		"gibibytes": quantityFunc(1 << 30), "mebibytes": quantityFunc(1 << 20), "bytes": quantityFunc(1),
	}
}

// maxQuantityExponent bounds the decimal exponent of a quantity the template functions convert:
// 10^±64 is far beyond any size or count, and the conversion is exact (big.Rat) below it.
const maxQuantityExponent = 64

// quantityExponent matches a quantity's decimal exponent (resource.Quantity's <decimalExponent>:
// "e" or "E" and a signed number, at the end).
var quantityExponent = regexp.MustCompile(`[eE]([+-]?[0-9]+)$`)

// quantityFunc returns a function that parses a Kubernetes quantity and divides it by unit. A
// quantity whose decimal exponent is beyond ±maxQuantityExponent is an argument error.
func quantityFunc(unit int64) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "quantity", Type: cty.String}},
		Type:   function.StaticReturnType(cty.Number),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			text := strings.TrimSpace(args[0].AsString())
			// 1e2000000000 parses, and 10^2000000000 would take gigabytes to compute; parsing
			// 1e-2000000000 itself takes as long (it is rounded): the exponent is checked first.
			if m := quantityExponent.FindStringSubmatch(text); m != nil {
				if e, err := strconv.Atoi(m[1]); err != nil || e > maxQuantityExponent || e < -maxQuantityExponent {
					return cty.NilVal, function.NewArgErrorf(0, "%q is out of range: its exponent is beyond ±%d", text, maxQuantityExponent)
				}
			}
			q, err := resource.ParseQuantity(text)
			if err != nil {
				return cty.NilVal, function.NewArgErrorf(0, "%q is not a quantity: %v", args[0].AsString(), err)
			}
			scale := q.AsDec().Scale()
			r := new(big.Rat).SetFrac(q.AsDec().UnscaledBig(), big.NewInt(1))
			ten := big.NewInt(10)
			if scale > 0 {
				r.Quo(r, new(big.Rat).SetInt(new(big.Int).Exp(ten, big.NewInt(int64(scale)), nil)))
			} else if scale < 0 {
				r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(ten, big.NewInt(int64(-scale)), nil)))
			}
			r.Quo(r, new(big.Rat).SetInt64(unit))
			return cty.NumberVal(new(big.Float).SetRat(r)), nil
		},
	})
}

func decodeJSON(raw []byte) (cty.Value, error) {
	ty, err := ctyjson.ImpliedType(raw)
	if err != nil {
		return cty.NilVal, err
	}
	return ctyjson.Unmarshal(raw, ty)
}

func stringMap(m map[string]string) cty.Value {
	if len(m) == 0 {
		return cty.MapValEmpty(cty.String)
	}
	vals := make(map[string]cty.Value, len(m))
	for k, v := range m {
		vals[k] = cty.StringVal(v)
	}
	return cty.MapVal(vals)
}

func diagText(diags hcl.Diagnostics) string {
	var parts []string
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			msg := d.Summary
			if d.Detail != "" {
				msg += ": " + d.Detail
			}
			parts = append(parts, msg)
		}
	}
	return strings.Join(parts, "; ")
}
