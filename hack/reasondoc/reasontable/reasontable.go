// Package reasontable builds docs/reference/conditions.md: one table of every reason the
// controller puts in a condition or an event, and one of the reasons a plan waits, each with what
// it means and what to do.
//
// The reasons come from the code, read with go/ast (nothing is compiled or imported):
//   - every constant named Reason* in api/v1alpha1 (condition and event reasons);
//   - every constant named Hold* in api/v1alpha1 (status.pendingPlan.reason);
//   - every string literal given as a reason in internal/controller: the reason argument of
//     Eventf and setCondition, and the Reason field of a metav1.Condition literal.
//
// What a reason means is the constant's doc comment (the part of it that names the constant, as
// in "// ReasonStateMissing: a resource that was applied has no state"), unless reasons.yaml
// gives a "means" of its own. Where it is set and what to do are in reasons.yaml, keyed by the
// reason's value. Generate fails when a reason of the code has no entry there, or an entry names
// a reason the code no longer has, so a new reason cannot reach the table without its text.
//
// Files: reasontable.go (the types and Collect), scan.go (reading the code with go/ast), page.go
// (reasons.yaml, the check against it, and the page).
package reasontable

import (
	"path/filepath"
	"sort"
	"strings"
)

// Paths, relative to the repository's root.
const (
	// OutputPath is the generated page.
	OutputPath = "docs/reference/conditions.md"
	// DataPath holds where each reason is set and what to do about it.
	DataPath = "hack/reasondoc/reasons.yaml"
	// Command regenerates OutputPath; the page and the docs check name it.
	Command = "make docs"

	apiDir        = "api/v1alpha1"
	controllerDir = "internal/controller"
)

// Reason is one reason found in the code.
type Reason struct {
	// Value is what people see in a condition or an event.
	Value string
	// Constants are the Go constants that hold it ("v1alpha1.ReasonStateLocked"), if any.
	Constants []string
	// Doc is what the constants' doc comments say it means ("" when they say nothing of it).
	Doc string
	// Literals are the files that use it as a string literal (internal/controller/x.go).
	Literals []string
	// Stalls says it is one of v1alpha1.TerminalReasons: Ready=False with it sets Stalled=True.
	Stalls bool
}

// Entry is the text reasons.yaml keeps for one reason.
type Entry struct {
	// Where names the objects and conditions that carry it: "InfraResource Synced=False".
	Where string `json:"where"`
	// Means overrides the constant's doc comment, or stands for it when there is none.
	Means string `json:"means,omitempty"`
	// Do is what to do about it.
	Do string `json:"do"`
}

// Data is reasons.yaml.
type Data struct {
	// Reasons are condition and event reasons, keyed by value.
	Reasons map[string]Entry `json:"reasons"`
	// Holds are the reasons a plan waits (status.pendingPlan.reason), keyed by value.
	Holds map[string]Entry `json:"holds"`
}

// Collected is every reason the code has.
type Collected struct {
	Reasons []Reason
	Holds   []Reason
	// Terminal says the API has TerminalReasons (the reasons that make an object Stalled).
	Terminal bool
}

// Collect reads the reasons from the code under root (see the package doc for which). It returns
// the error of a directory without Go files, of a file that does not parse, or of a
// TerminalReasons that is not a map literal.
func Collect(root string) (*Collected, error) {
	c := &Collected{}
	api, err := constants(filepath.Join(root, apiDir), "Reason", "v1alpha1")
	if err != nil {
		return nil, err
	}
	literals, err := literalReasons(root, controllerDir)
	if err != nil {
		return nil, err
	}
	for value, files := range literals {
		r := api[value]
		if r == nil {
			r = &Reason{Value: value}
			api[value] = r
		}
		r.Literals = files
	}
	stalls, err := terminalReasons(filepath.Join(root, apiDir))
	if err != nil {
		return nil, err
	}
	for _, r := range api {
		for _, name := range r.Constants {
			if stalls[strings.TrimPrefix(name, "v1alpha1.")] {
				r.Stalls = true
				c.Terminal = true
			}
		}
	}
	c.Reasons = sorted(api)
	holds, err := constants(filepath.Join(root, apiDir), "Hold", "v1alpha1")
	if err != nil {
		return nil, err
	}
	c.Holds = sorted(holds)
	return c, nil
}

// sorted returns the reasons of m ordered by value, case-insensitively.
func sorted(m map[string]*Reason) []Reason {
	out := make([]Reason, 0, len(m))
	for _, r := range m {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToLower(out[i].Value) < strings.ToLower(out[j].Value) })
	return out
}
