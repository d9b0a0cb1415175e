package tfrunner

import (
	"context"
	"fmt"
	"slices"

	hcjson "github.com/hashicorp/terraform-json"
)

// Ownership marks: a module may label or tag the objects it makes with the name of the resource
// they belong to, so that a create resolved with an import identity can tell its own object from
// another resource's (issue 46). The keys, each where the providers allow it:
//   - OwnershipMark, "conductor.io/resource": Kubernetes labels or annotations (metadata[0]),
//     AWS and Azure tags;
//   - OwnershipMarkLabel, "conductor-resource": Google Cloud labels (no '/' or '.' allowed).
const (
	OwnershipMark      = "conductor.io/resource"
	OwnershipMarkLabel = "conductor-resource"
)

// markAttributes are the attributes of an object searched for an ownership mark: maps of the
// object itself, and those in its first metadata block (the kubernetes provider's shape).
var markAttributes = []string{"labels", "tags", "annotations"}

// ownershipMark returns the ownership mark of an object's attributes (a state's attribute values)
// and whether it has one.
func ownershipMark(attrs map[string]any) (string, bool) {
	maps := []map[string]any{attrs}
	if md, ok := attrs["metadata"].([]any); ok && len(md) > 0 {
		if m, ok := md[0].(map[string]any); ok {
			maps = append(maps, m)
		}
	}
	for _, m := range maps {
		for _, name := range markAttributes {
			values, _ := m[name].(map[string]any)
			for _, key := range []string{OwnershipMark, OwnershipMarkLabel} {
				if v, ok := values[key].(string); ok && v != "" {
					return v, true
				}
			}
		}
	}
	return "", false
}

// OwnershipMark reads the ownership mark of the object at module address in the workspace's state
// (show -json): "" and false when the object has none (its provider has no labels or tags, or the
// module sets none). Errors are show's.
func (w *Workspace) OwnershipMark(ctx context.Context, address string) (string, bool, error) {
	tf, err := w.tf()
	if err != nil {
		return "", false, err
	}
	st, err := tf.Show(ctx)
	if err != nil {
		return "", false, classify("show", err)
	}
	if st == nil || st.Values == nil {
		return "", false, nil
	}
	found := findStateResource(st.Values.RootModule, address)
	if found == nil {
		return "", false, nil
	}
	mark, ok := ownershipMark(found.AttributeValues)
	return mark, ok, nil
}

// findStateResource finds the managed resource at address in m or its child modules.
func findStateResource(m *hcjson.StateModule, address string) *hcjson.StateResource {
	if m == nil {
		return nil
	}
	if i := slices.IndexFunc(m.Resources, func(r *hcjson.StateResource) bool {
		return r.Address == address && r.Mode == hcjson.ManagedResourceMode
	}); i >= 0 {
		return m.Resources[i]
	}
	for _, c := range m.ChildModules {
		if r := findStateResource(c, address); r != nil {
			return r
		}
	}
	return nil
}

// Forget removes the object at module address from the workspace's state (state rm): the object
// itself is left as it is. Errors are Terraform's.
func (w *Workspace) Forget(ctx context.Context, address string) error {
	tf, err := w.tf()
	if err != nil {
		return err
	}
	if err := tf.StateRm(ctx, address); err != nil {
		return classify("state rm", err)
	}
	return nil
}

// checkOwner decides an object just adopted at addr against owner (Gate.Owner): nil when it has no
// ownership mark or names owner; otherwise it is removed from state again and the detail of the
// hold is returned.
func checkOwner(ctx context.Context, imp importer, addr, owner string) (string, error) {
	if owner == "" {
		return "", nil
	}
	mark, ok, err := imp.OwnershipMark(ctx, addr)
	if err != nil {
		return "", err
	}
	if !ok || mark == owner {
		return "", nil
	}
	if err := imp.Forget(ctx, addr); err != nil {
		return "", fmt.Errorf("giving back the object of %s, which belongs to %s: %w", addr, mark, err)
	}
	return fmt.Sprintf("the object with this ID belongs to resource %s (its ownership mark), not to %s: given back, not adopted", mark, owner), nil
}
