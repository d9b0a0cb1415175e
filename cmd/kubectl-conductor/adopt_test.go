package main

import (
	"testing"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// TestAdoptModuleName: the plugin nests adopted states under the module name runs call.
func TestAdoptModuleName(t *testing.T) {
	if rootModule != tfrunner.ModuleName {
		t.Fatalf("rootModule %q, runs call the module %q", rootModule, tfrunner.ModuleName)
	}
}

// TestAdoptRefuses: what adopt refuses before it copies anything.
func TestAdoptRefuses(t *testing.T) {
	refused(t, []string{"--class is required"}, "adopt", "secret/x")
	refused(t, []string{"want terraform/NAME, workspace/NAME or secret/NAME"}, "adopt", "pod/x", "--class", "c")
	refused(t, []string{"--reclaim-policy \"Keep\""}, "adopt", "secret/x", "--class", "c", "--reclaim-policy", "Keep")
	refused(t, []string{"secret/missing in default", "not found"}, "adopt", "secret/missing", "-n", "default", "--class", "c")
	refused(t, []string{"want name=JSON"}, "adopt", "terraform/x", "--class", "c", "--var", "a=not json")
	refused(t, []string{"Terraform", "is not served by this cluster"}, "adopt", "terraform/x", "--class", "c")
}
