package warm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// Issue 65 item 1: the dependency lock file a warm provider's package is checked against is read
// through no link a run planted: one linked to another class's lock file is refused, not followed.
// Before, os.ReadFile followed it.
func TestLockFileIsNoPlantedLink(t *testing.T) {
	lock := filepath.Join(t.TempDir(), ".terraform.lock.hcl")
	if err := os.WriteFile(lock, []byte(`provider "registry.opentofu.org/hashicorp/random" {
  version = "3.6.0"
  hashes  = ["h1:planted"]
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(t.TempDir(), ".terraform.lock.hcl")
	if err := os.Symlink(lock, linked); err != nil {
		t.Fatal(err)
	}
	if hashes, err := lockedHashes(lock, "registry.opentofu.org/hashicorp/random"); err != nil || len(hashes) != 1 {
		t.Fatalf("the lock file itself: %v, %v", hashes, err)
	}
	if hashes, err := lockedHashes(linked, "registry.opentofu.org/hashicorp/random"); !errors.Is(err, wsfs.ErrNotRegularFile) {
		t.Errorf("the lock file was read through a planted link: %v, %v", hashes, err)
	}
}
