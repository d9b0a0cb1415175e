package render

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// CheckIdentity reports whether an import identity template (a class's importIdentities value)
// renders distinct IDs for distinct resources, so that a create resolved with it can adopt only
// its own resource's object. The one value unique per resource is `resource.name` (cluster-wide,
// and for a provisioned resource derived from its claim's UID); claim namespace and name are not:
// `${claim.namespace}-${claim.name}` renders "a-b-c" for claim b-c in namespace a and for claim c
// in namespace a-b, and a claim deleted and made again renders what the first did.
//
// The template must therefore interpolate `${resource.name}` bare (not inside a function call,
// which may cut it, as substr does) at a place the name can be read back from the rendered ID:
//   - all of the template before it is literal text, and after it comes nothing, only literal
//     text, or literal text whose first character a resource name cannot hold (anything but
//     a-z, 0-9, '-' and '.', Kubernetes' DNS-1123 subdomain); or
//   - the mirror of that: all after it is literal text, and before it nothing or literal text
//     whose last character a resource name cannot hold.
//
// Either way the name is a function of the ID, so two resources never share one. It returns nil
// for such a template, and otherwise an error saying why (a template that does not parse
// included).
func CheckIdentity(tmpl string) error {
	expr, diags := hclsyntax.ParseTemplate([]byte(tmpl), "identity", hcl.InitialPos)
	if diags.HasErrors() {
		return fmt.Errorf("%s", diagText(diags))
	}
	var parts []hclsyntax.Expression
	switch e := expr.(type) {
	case *hclsyntax.TemplateExpr:
		parts = e.Parts
	case *hclsyntax.TemplateWrapExpr:
		parts = []hclsyntax.Expression{e.Wrapped}
	default:
		parts = []hclsyntax.Expression{expr}
	}
	found := false
	for i, p := range parts {
		if !isResourceName(p) {
			continue
		}
		found = true
		before, after := allLiteral(parts[:i]), allLiteral(parts[i+1:])
		switch {
		case before && after,
			before && startsOutsideName(parts[i+1]),
			after && endsOutsideName(parts[i-1]):
			return nil
		}
	}
	if !found {
		return fmt.Errorf("it does not interpolate ${resource.name} bare (outside any function call)")
	}
	return fmt.Errorf("${resource.name} cannot be read back from the ID: only literal text may be on one side of it, " +
		"and on the other nothing, literal text, or a literal character a resource name cannot hold (such as '/') before anything else")
}

// isResourceName reports an interpolation of exactly resource.name.
func isResourceName(e hclsyntax.Expression) bool {
	st, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(st.Traversal) != 2 || st.Traversal.RootName() != "resource" {
		return false
	}
	attr, ok := st.Traversal[1].(hcl.TraverseAttr)
	return ok && attr.Name == "name"
}

// literal returns a template part's text when it is literal text.
func literal(e hclsyntax.Expression) (string, bool) {
	lit, ok := e.(*hclsyntax.LiteralValueExpr)
	if !ok || lit.Val.Type() != cty.String || lit.Val.IsNull() {
		return "", false
	}
	return lit.Val.AsString(), true
}

func allLiteral(parts []hclsyntax.Expression) bool {
	for _, p := range parts {
		if _, ok := literal(p); !ok {
			return false
		}
	}
	return true
}

// nameChars are the characters of a resource name (DNS-1123 subdomain).
const nameChars = "abcdefghijklmnopqrstuvwxyz0123456789-."

func startsOutsideName(e hclsyntax.Expression) bool {
	s, ok := literal(e)
	return ok && s != "" && !strings.ContainsRune(nameChars, rune(s[0]))
}

func endsOutsideName(e hclsyntax.Expression) bool {
	s, ok := literal(e)
	return ok && s != "" && !strings.ContainsRune(nameChars, rune(s[len(s)-1]))
}
