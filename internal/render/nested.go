package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// compileValue compiles one variable's JSON value into an HCL expression, as Terraform reads a
// value in its JSON syntax: every string, at any depth of objects and arrays, is a template
// (hclsyntax.ParseTemplate: "${claim.name}-db", or "${x}" alone, which keeps x's type); objects
// and arrays become object and tuple constructors of their compiled members; numbers, booleans and
// null are literals. Templates are checked as in Compile. The expression is built as a syntax tree,
// never as HCL text. It returns an *Error naming the variable when a template does not parse or
// refers to something it may not.
func compileValue(name string, raw []byte) (hclsyntax.Expression, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Error{Name: name, Message: err.Error()}
	}
	return compileNode(name, v)
}

func compileNode(name string, v any) (hclsyntax.Expression, error) {
	switch v := v.(type) {
	case string:
		return compileTemplate(name, v)
	case map[string]any:
		obj := &hclsyntax.ObjectConsExpr{}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			val, err := compileNode(name, v[k])
			if err != nil {
				return nil, err
			}
			obj.Items = append(obj.Items, hclsyntax.ObjectConsItem{
				KeyExpr:   &hclsyntax.ObjectConsKeyExpr{Wrapped: &hclsyntax.LiteralValueExpr{Val: cty.StringVal(k)}},
				ValueExpr: val,
			})
		}
		return obj, nil
	case []any:
		tuple := &hclsyntax.TupleConsExpr{}
		for _, e := range v {
			val, err := compileNode(name, e)
			if err != nil {
				return nil, err
			}
			tuple.Exprs = append(tuple.Exprs, val)
		}
		return tuple, nil
	case json.Number:
		n, err := cty.ParseNumberVal(v.String())
		if err != nil {
			return nil, &Error{Name: name, Message: err.Error()}
		}
		return &hclsyntax.LiteralValueExpr{Val: n}, nil
	case bool:
		return &hclsyntax.LiteralValueExpr{Val: cty.BoolVal(v)}, nil
	case nil:
		return &hclsyntax.LiteralValueExpr{Val: cty.NullVal(cty.DynamicPseudoType)}, nil
	}
	return nil, &Error{Name: name, Message: fmt.Sprintf("unexpected JSON value %T", v)}
}

// compileTemplate parses one string as an HCL template that may refer only to claim, class,
// resource and inputs and call only Functions().
func compileTemplate(name, s string) (hclsyntax.Expression, error) {
	expr, diags := hclsyntax.ParseTemplate([]byte(s), name, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, &Error{Name: name, Message: diagText(diags)}
	}
	for _, tr := range expr.Variables() {
		if root := tr.RootName(); root != "claim" && root != "class" && root != "resource" && root != "inputs" {
			return nil, &Error{Name: name, Message: fmt.Sprintf("unknown variable %q: templates see only claim, class, resource and inputs", root)}
		}
	}
	if fn := unknownFunction(expr); fn != "" {
		return nil, &Error{Name: name, Message: fmt.Sprintf("call to unknown function %q: templates may call only the functions conductor-tf provides (a subset of go-cty's standard library, and gibibytes, mebibytes, bytes)", fn)}
	}
	return expr, nil
}

// hasString reports whether a JSON document holds a string anywhere: only then is it compiled
// into an expression; anything else is decoded once as a typed constant.
func hasString(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if _, ok := tok.(string); ok {
			return true
		}
	}
}
