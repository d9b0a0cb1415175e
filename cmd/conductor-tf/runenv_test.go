package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunEnvPassesOnlyWhatIsNamed: a run gets PATH, the plugin cache, the base names and those
// --run-env lists, and nothing else of the process's environment (issue 45: extraEnv reached no
// run, and the docs said it did).
func TestRunEnvPassesOnlyWhatIsNamed(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "the manager's")
	t.Setenv("HTTPS_PROXY", "http://proxy:3128")
	env := runEnv("/work", []string{"AWS_REGION", "UNSET_NAME"})
	if env["AWS_REGION"] != "eu-west-1" || env["HTTPS_PROXY"] != "http://proxy:3128" {
		t.Errorf("named variables missing: %v", env)
	}
	for k := range env {
		if strings.HasPrefix(k, "AWS_SECRET") || k == "UNSET_NAME" || k == "HOME" || k == "TMPDIR" {
			t.Errorf("%s reached the run", k)
		}
	}
	if env["TF_PLUGIN_CACHE_DIR"] != filepath.Join("/work", "plugin-cache") || env["PATH"] != os.Getenv("PATH") {
		t.Errorf("PATH or the plugin cache: %v", env)
	}
}

// TestEnsureCLIConfigWritesOneNoRunCanWrite: without TF_CLI_CONFIG_FILE, the manager writes one
// (direct installation only) in its work directory, read-only, and names it; a given one is kept.
func TestEnsureCLIConfigWritesOneNoRunCanWrite(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{}
	path, err := ensureCLIConfig(env, dir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil || env["TF_CLI_CONFIG_FILE"] != path || !strings.Contains(string(data), "direct {") {
		t.Fatalf("%s: %q, %v; env %v", path, data, err, env)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o444 {
		t.Errorf("mode %v, want read-only", fi.Mode())
	}
	if _, err := ensureCLIConfig(env, dir); err != nil { // again, over the read-only file
		t.Fatal(err)
	}
	given := map[string]string{"TF_CLI_CONFIG_FILE": "/etc/mirror.tfrc"}
	if p, _ := ensureCLIConfig(given, dir); p != "/etc/mirror.tfrc" {
		t.Errorf("a given CLI configuration was replaced by %s", p)
	}
	rc := filepath.Join(dir, "mirror.tfrc")
	_ = os.WriteFile(rc, []byte("provider_installation {\n  filesystem_mirror {\n    path = \"/providers\"\n  }\n  direct {}\n}\n"), 0o600)
	if got := cliConfigPaths(rc); len(got) != 1 || got[0] != "/providers" {
		t.Errorf("mirror paths of %s: %v", rc, got)
	}
}

// TestReadPathsThatWouldOpenWhatIsHidden: a --run-sandbox-read path is granted as named, even
// inside hidden ones, so one that holds a hidden path (resolved through links, as /var/run is a link
// to /run) or lies inside the work directory is refused at start.
func TestReadPathsThatWouldOpenWhatIsHidden(t *testing.T) {
	root := t.TempDir()
	work, token, mounted := filepath.Join(root, "work"), filepath.Join(root, "run", "conductor-tf", "token"), filepath.Join(root, "run", "secrets", "eks")
	for _, d := range []string{work, filepath.Dir(token), mounted} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(token, []byte("t"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "run"), filepath.Join(root, "varrun")); err != nil {
		t.Fatal(err)
	}
	hide := []string{token, work}
	for _, bad := range []string{root, filepath.Join(root, "run"), filepath.Join(root, "varrun", "conductor-tf"), filepath.Join(work, "x", ".."), work} {
		if err := checkReadPaths([]string{bad}, hide, work); err == nil {
			t.Errorf("%s: granted", bad)
		}
	}
	if err := checkReadPaths([]string{mounted, filepath.Join(root, "varrun", "secrets", "eks"), filepath.Join(root, "missing")}, hide, work); err != nil {
		t.Errorf("a mounted path beside the hidden ones: %v", err)
	}
}
