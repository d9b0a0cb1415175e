package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func newTreeCommand(o *rootOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "tree",
		Short: "Show the namespace's claims as the graph of what reads what (spec.parametersFrom)",
		Long: `Print the claims of the namespace as a tree: each claim that reads no other claim of the
namespace is a root, and under each claim the claims that read its outputs, with the parameters they
read. Each node shows the claim's phase, Ready and InputsReady reasons, and its resource. A claim
read from another namespace is shown with its namespace. A claim on a cycle is marked (cycle).

-o dot prints the graph in Graphviz DOT, -o mermaid as a Mermaid flowchart, for documentation.

Example:
  kubectl conductor tree -n team-a
  kubectl conductor tree -n team-a -o mermaid`,
		Args: cobra.NoArgs,
		RunE: o.run(func(cmd *cobra.Command, cl *Clients, _ []string) error {
			return runTree(cmd.Context(), o.streams.Out, cl, output)
		}),
	}
	cmd.Flags().StringVarP(&output, "output", "o", "tree", "tree, dot or mermaid")
	return cmd
}

// graph is the namespace's claims and the edges between them: edges[upstream] are the claims that
// read upstream, each with what it reads.
type graph struct {
	nodes map[types.NamespacedName]*v1alpha1.InfraClaim
	edges map[types.NamespacedName][]edge
	// foreign are upstreams in other namespaces (no claim of them is listed).
	foreign map[types.NamespacedName]bool
}

// edge is what one reader reads of one upstream: "output → parameter", one per read.
type edge struct {
	reader types.NamespacedName
	reads  []string
}

// text is the edge's reads as the tree shows them: "a as x, b as y".
func (e edge) text() string {
	parts := make([]string, len(e.reads))
	for i, r := range e.reads {
		out, param, _ := strings.Cut(r, " → ")
		parts[i] = out + " as " + param
	}
	return strings.Join(parts, ", ")
}

// graphOf builds the graph of claims (one namespace's).
func graphOf(claims []v1alpha1.InfraClaim) *graph {
	g := &graph{nodes: map[types.NamespacedName]*v1alpha1.InfraClaim{}, edges: map[types.NamespacedName][]edge{}, foreign: map[types.NamespacedName]bool{}}
	for i := range claims {
		g.nodes[client.ObjectKeyFromObject(&claims[i])] = &claims[i]
	}
	for i := range claims {
		c := &claims[i]
		for _, p := range c.Spec.ParametersFrom {
			up := types.NamespacedName{Namespace: p.UpstreamNamespace(c.Namespace), Name: p.Claim}
			if g.nodes[up] == nil {
				g.foreign[up] = true
			}
			reader := client.ObjectKeyFromObject(c)
			i := slices.IndexFunc(g.edges[up], func(e edge) bool { return e.reader == reader })
			if i < 0 {
				g.edges[up] = append(g.edges[up], edge{reader: reader})
				i = len(g.edges[up]) - 1
			}
			g.edges[up][i].reads = append(g.edges[up][i].reads, p.Output+" → "+p.Parameter)
		}
	}
	for k := range g.edges {
		for i := range g.edges[k] {
			slices.Sort(g.edges[k][i].reads)
		}
		slices.SortFunc(g.edges[k], func(a, b edge) int { return strings.Compare(a.reader.String(), b.reader.String()) })
	}
	return g
}

// roots are the claims that read no claim of the graph's namespace, and the foreign upstreams,
// sorted; a graph that is all cycle has its claims' first as root.
func (g *graph) roots() []types.NamespacedName {
	var out []types.NamespacedName
	for k, c := range g.nodes {
		local := false
		for _, p := range c.Spec.ParametersFrom {
			local = local || g.nodes[types.NamespacedName{Namespace: p.UpstreamNamespace(c.Namespace), Name: p.Claim}] != nil
		}
		if !local {
			out = append(out, k)
		}
	}
	for k := range g.foreign {
		out = append(out, k)
	}
	slices.SortFunc(out, byName)
	return out
}

// label is a node's line: name, phase, Ready, InputsReady and resource.
func (g *graph) label(k types.NamespacedName, ns string) string {
	name := k.Name
	if k.Namespace != ns {
		name = k.String()
	}
	c := g.nodes[k]
	if c == nil {
		return name + " (another namespace)"
	}
	parts := []string{string(c.Status.Phase)}
	if parts[0] == "" {
		parts[0] = "Pending"
	}
	if r := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady); r != nil {
		parts = append(parts, "Ready="+string(r.Status)+"("+r.Reason+")")
	}
	if r := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionInputsReady); r != nil && r.Status != "True" {
		parts = append(parts, "Inputs="+r.Reason)
	}
	if c.Status.ResourceName != "" {
		parts = append(parts, "resource "+c.Status.ResourceName)
	}
	if !c.DeletionTimestamp.IsZero() {
		parts = append(parts, "deleting")
	}
	return name + "  [" + strings.Join(parts, ", ") + "]"
}

// writeTree prints the graph as an indented tree from its roots; a claim reached twice is printed
// in full once and then as "(see above)", and a claim met again on its own path as "(cycle)".
func (g *graph) writeTree(w io.Writer, ns string) {
	printed := map[types.NamespacedName]bool{}
	var walk func(k types.NamespacedName, prefix string, path map[types.NamespacedName]bool)
	walk = func(k types.NamespacedName, prefix string, path map[types.NamespacedName]bool) {
		edges := g.edges[k]
		for i, e := range edges {
			branch, next := "├── ", "│   "
			if i == len(edges)-1 {
				branch, next = "└── ", "    "
			}
			line := fmt.Sprintf("%s%s%s  (reads %s)", prefix, branch, g.label(e.reader, ns), e.text())
			switch {
			case path[e.reader]:
				fmt.Fprintln(w, line+"  (cycle)")
			case printed[e.reader]:
				fmt.Fprintln(w, line+"  (see above)")
			default:
				fmt.Fprintln(w, line)
				printed[e.reader] = true
				path[e.reader] = true
				walk(e.reader, prefix+next, path)
				delete(path, e.reader)
			}
		}
	}
	roots := g.roots()
	if len(roots) == 0 {
		// Every claim is on a cycle: start at the first.
		roots = sortedKeys(g.nodes)[:1]
	}
	for _, r := range roots {
		fmt.Fprintln(w, g.label(r, ns))
		printed[r] = true
		walk(r, "", map[types.NamespacedName]bool{r: true})
	}
	for _, k := range sortedKeys(g.nodes) {
		if !printed[k] {
			fmt.Fprintln(w, g.label(k, ns)+"  (cycle)")
		}
	}
}

// byName orders claims by "namespace/name".
func byName(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) }

// sortedKeys are m's keys by name.
func sortedKeys[V any](m map[types.NamespacedName]V) []types.NamespacedName {
	return slices.SortedFunc(maps.Keys(m), byName)
}

// nodeID is a DOT and Mermaid identifier for k: letters, digits and underscores only.
func nodeID(k types.NamespacedName) string {
	return "n_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, k.String())
}

// allNodes are the namespace's claims and the other namespaces' claims they read, by name.
func (g *graph) allNodes() []types.NamespacedName {
	out := append(sortedKeys(g.nodes), sortedKeys(g.foreign)...)
	slices.SortFunc(out, byName)
	return out
}

// writeDOT prints the graph in Graphviz DOT: an edge from each upstream to each reader, labelled
// output → parameter.
func (g *graph) writeDOT(w io.Writer, ns string) {
	fmt.Fprintf(w, "digraph %q {\n  rankdir=LR;\n", ns)
	for _, k := range g.allNodes() {
		fmt.Fprintf(w, "  %s [label=%q];\n", nodeID(k), g.label(k, ns))
	}
	for _, up := range sortedKeys(g.edges) {
		for _, e := range g.edges[up] {
			fmt.Fprintf(w, "  %s -> %s [label=%q];\n", nodeID(up), nodeID(e.reader), strings.Join(e.reads, ", "))
		}
	}
	fmt.Fprintln(w, "}")
}

// writeMermaid prints the graph as a Mermaid flowchart.
func (g *graph) writeMermaid(w io.Writer, ns string) {
	fmt.Fprintln(w, "flowchart LR")
	quote := func(s string) string { return strings.ReplaceAll(s, `"`, "#quot;") }
	for _, k := range g.allNodes() {
		fmt.Fprintf(w, "  %s[\"%s\"]\n", nodeID(k), quote(g.label(k, ns)))
	}
	for _, up := range sortedKeys(g.edges) {
		for _, e := range g.edges[up] {
			fmt.Fprintf(w, "  %s -->|\"%s\"| %s\n", nodeID(up), quote(strings.Join(e.reads, ", ")), nodeID(e.reader))
		}
	}
}

// runTree lists the namespace's claims and prints their graph. Errors: the list's, or an unknown
// output format.
func runTree(ctx context.Context, w io.Writer, cl *Clients, output string) error {
	claims := &v1alpha1.InfraClaimList{}
	if err := cl.Client.List(ctx, claims, client.InNamespace(cl.Namespace)); err != nil {
		return fmt.Errorf("listing the claims of namespace %s: %w", cl.Namespace, err)
	}
	g := graphOf(claims.Items)
	switch output {
	case "tree", "":
		if len(claims.Items) == 0 {
			fmt.Fprintf(w, "no claims in namespace %s\n", cl.Namespace)
			return nil
		}
		g.writeTree(w, cl.Namespace)
	case "dot":
		g.writeDOT(w, cl.Namespace)
	case "mermaid":
		g.writeMermaid(w, cl.Namespace)
	default:
		return fmt.Errorf("unknown output %q: tree, dot or mermaid", output)
	}
	return nil
}
