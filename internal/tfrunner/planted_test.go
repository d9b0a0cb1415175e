package tfrunner

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// plant makes a victim file outside the workspace (another tenant's variables, a shared provider
// binary) and returns its path and content.
func plant(t *testing.T, name, content string) (string, string) {
	t.Helper()
	victim := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(victim, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return victim, content
}

// Issue 65 item 1: the manager never writes through a link a run planted in its workspace. Before,
// the root module and the variables went through "<file>.tmp": a run that made that name a link
// had the unconfined manager overwrite the link's target (a shared provider binary, another
// workspace's file) with the next run's variables.
func TestPrepareWritesThroughNoPlantedLink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "res-a")
	w, err := NewWorkspace(dir, Binary{Path: "/bin/false"}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	provider, was := plant(t, "terraform-provider-random", "the shared provider binary")
	other, otherWas := plant(t, "conductor.tfvars.json", `{"password":"another tenant's"}`)
	for link, target := range map[string]string{
		varsFile + ".tmp": provider, rootFile + ".tmp": provider, // the old temporary names
		varsFile: other, // the name itself
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "trap"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Module: Module{Source: "./m"}, Variables: map[string]any{"name": "a"},
		SensitiveVariables: map[string]string{"password": "s3cret"}}
	if _, err := w.Prepare(spec); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{provider: was, other: otherWas} {
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("%s now holds %q: the manager wrote through a planted link", path, got)
		}
	}
	for _, name := range []string{varsFile, rootFile} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v, want the workspace's own regular file", name, fi, err)
		}
	}
	for _, name := range []string{varsFile + ".tmp", rootFile + ".tmp", "trap"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still in the workspace (%v): planted links and special files are removed before a run", name, err)
		}
	}
}

// Nor reads through one: an errored.tfstate that is a link (or a hard link) to another tenant's
// file is not taken as the run's errored state. Before, the manager read it and kept it as state.
func TestErroredStateIsNoPlantedLink(t *testing.T) {
	runs := t.TempDir()
	p := &Pool{opts: PoolOptions{Dir: runs}}
	other, _ := plant(t, "conductor.tfvars.json", `{"password":"another tenant's"}`)
	for _, tc := range []struct {
		name, key string
		make      func(target, at string) error
	}{{"symlink", "res-s", os.Symlink}, {"hard link", "res-h", os.Link}} {
		key := tc.key
		if err := os.MkdirAll(filepath.Join(runs, key), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := tc.make(other, filepath.Join(runs, key, erroredStateFile)); err != nil {
			t.Fatal(err)
		}
		if e, ok := p.ErroredState(key); ok {
			t.Errorf("%s: errored state %q read through a planted %s", key, e.State, tc.name)
		}
	}
	// The run's own errored state is read.
	if err := os.MkdirAll(filepath.Join(runs, "res-own"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runs, "res-own", erroredStateFile), []byte(`{"version":4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, ok := p.ErroredState("res-own"); !ok || string(e.State) != `{"version":4}` {
		t.Errorf("the run's own errored state: %q %v", e.State, ok)
	}
}

// Issue 65 item 1: what init left in a workspace (.terraform/modules/modules.json, the lock file)
// is read through no link a run planted: a manifest linked to a file elsewhere (naming another
// class's installed module) and a lock file linked to another class's are refused, not followed.
// Before, os.ReadFile followed both.
func TestInitFilesAreNoPlantedLinks(t *testing.T) {
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".terraform", "modules"), 0o700); err != nil {
		t.Fatal(err)
	}
	manifest, _ := plant(t, "modules.json", `{"Modules":[{"Key":"main","Source":"x","Dir":"/elsewhere/main"}]}`)
	if err := os.Symlink(manifest, filepath.Join(ws, ".terraform", "modules", "modules.json")); err != nil {
		t.Fatal(err)
	}
	if dir, err := InstalledModuleDir(ws); !errors.Is(err, wsfs.ErrNotRegularFile) {
		t.Errorf("the module manifest was read through a planted link: %q, %v", dir, err)
	}
	if _, err := readStateOnlyTypes(ws); !errors.Is(err, wsfs.ErrNotRegularFile) {
		t.Errorf("the state-only types were read through a planted link: %v", err)
	}
	// A .terraform that is itself a link, not the one into the shared inits, is refused too.
	elsewhere := t.TempDir()
	if err := os.Rename(filepath.Join(ws, ".terraform"), filepath.Join(elsewhere, ".terraform")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, ".terraform"), filepath.Join(ws, ".terraform")); err != nil {
		t.Fatal(err)
	}
	if dir, err := InstalledModuleDir(ws); !errors.Is(err, wsfs.ErrNotRegularFile) {
		t.Errorf("the module manifest was read through a planted .terraform link: %q, %v", dir, err)
	}
}
