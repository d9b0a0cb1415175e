package tfrunner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

// TestCreatesOfAnotherProviderNamedRandomAreRecorded: a create is left unrecorded at its start only
// when its type's provider, as its module declares it, lives in state alone. Issue 46: the rule
// read the type's prefix only, so a module whose "random" is another provider (a fork under another
// namespace, whose random_* resources make real objects) created them unrecorded, and a run that
// died mid-create made them again.
func TestCreatesOfAnotherProviderNamedRandomAreRecorded(t *testing.T) {
	work := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(work, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".terraform/modules/modules.json", `{"Modules":[{"Key":"","Source":"","Dir":"."},
		{"Key":"main","Source":"./m","Dir":"m"},{"Key":"main.inner","Source":"./inner","Dir":"m/inner"}]}`)
	write("m/main.tf", `
terraform {
  required_providers {
    random = { source = "registry.opentofu.org/hashicorp/random" }
  }
}
resource "random_pet" "name" {}
resource "time_sleep" "wait" { create_duration = "1s" }
resource "terraform_data" "hook" {}
resource "random_id" "via_other" { provider = evil }
resource "random_id" "plain" { byte_length = 4 }
module "inner" { source = "./inner" }
`)
	write("m/inner/main.tf", `
terraform {
  required_providers {
    random = { source = "evilcorp/random" }
  }
}
resource "random_password" "real" { length = 8 }
resource "null_resource" "x" {}
`)
	types, err := readStateOnlyTypes(work)
	if err != nil {
		t.Fatal(err)
	}
	// recorded reads an apply stream that starts the create of addr, as the apply's reader does.
	recorded := func(addr string, stateOnly func(string) bool) bool {
		line := fmt.Sprintf(`{"type":"apply_start","hook":{"resource":{"addr":%q},"action":"create"}}`, addr)
		got := false
		if _, err := tfjson.ReadApply(strings.NewReader(line+"\n"), func(string) error { got = true; return nil }, stateOnly); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for addr, want := range map[string]bool{
		"module.main.random_pet.name":                        false, // hashicorp/random: state only
		"module.main.time_sleep.wait":                        false, // implied hashicorp/time
		"module.main.terraform_data.hook":                    false, // built in
		"module.main.random_id.via_other":                    true,  // served by the module's "evil"
		"module.main.module.inner.random_password.real":      true,  // evilcorp/random
		`module.main.module.inner["a"].random_password.real`: true,
		"module.main.module.inner.null_resource.x":           false, // implied hashicorp/null
		"module.main.aws_db_instance.db":                     true,
		"module.main.module.unknown.random_pet.name":         true, // a module not read: recorded
	} {
		if got := recorded(addr, types.has); got != want {
			t.Errorf("%s: recorded at apply_start %v, want %v", addr, got, want)
		}
	}
	if got := recorded("module.main.random_pet.name", nil); !got {
		t.Error("without the modules read, a create of random_pet was not recorded")
	}
}
