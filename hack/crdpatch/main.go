// Command crdpatch sets, in the generated InfraClaim CRD, the schema of each claim request
// (spec.resources.requests values) to v1alpha1.RequestPattern and MaxQuantityLength. controller-gen
// writes resource.Quantity's own schema there, and a marker cannot reach a map's values; a CEL rule
// over the map exceeds the API server's cost budget. Run by `make manifests` after controller-gen:
//
//	go run ./hack/crdpatch config/crd/bases/conductor.io_infraclaims.yaml
//
// It edits the file's text in place (the one pattern line under requests' additionalProperties,
// plus a maxLength line), so the rest of controller-gen's output is left byte for byte. It fails
// when the file does not have that shape.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch <conductor.io_infraclaims.yaml>")
		os.Exit(2)
	}
	if err := patch(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
}

func patch(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	var out []string
	patched := 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		out = append(out, l)
		if strings.TrimSpace(l) != "requests:" || i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "additionalProperties:" {
			continue
		}
		// The block of additionalProperties: its lines are indented deeper than that key.
		out = append(out, lines[i+1])
		indent := len(lines[i+1]) - len(strings.TrimLeft(lines[i+1], " "))
		j := i + 2
		var block []string
		for ; j < len(lines); j++ {
			d := len(lines[j]) - len(strings.TrimLeft(lines[j], " "))
			if strings.TrimSpace(lines[j]) == "" || d <= indent {
				break
			}
			block = append(block, lines[j])
		}
		sub := strings.Repeat(" ", indent+2)
		found := false
		for _, bl := range block {
			switch {
			case strings.HasPrefix(bl, sub+"pattern:"):
				out = append(out, sub+"maxLength: "+strconv.Itoa(v1alpha1.MaxQuantityLength))
				out = append(out, sub+"pattern: "+strconv.Quote(v1alpha1.RequestPattern))
				found = true
			case strings.HasPrefix(bl, sub+"maxLength:"):
			default:
				out = append(out, bl)
			}
		}
		if !found {
			return fmt.Errorf("%s: requests' additionalProperties has no pattern", path)
		}
		patched++
		i = j - 1
	}
	if patched == 0 {
		return fmt.Errorf("%s: no requests map with additionalProperties", path)
	}
	return os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644)
}
