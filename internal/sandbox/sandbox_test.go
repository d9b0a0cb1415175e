package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) {
	Enter()
	os.Exit(m.Run())
}

// run starts path with args, rewritten by s, and returns its combined output and error.
func run(t *testing.T, s *Sandbox, path string, args ...string) (string, error) {
	t.Helper()
	exe, env := s.Command(path, map[string]string{"PATH": os.Getenv("PATH"), "SECRET_MARK": "in-the-parent"})
	cmd := exec.Command(exe, args...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func needLandlock(t *testing.T) {
	t.Helper()
	if ABI() < 1 {
		t.Skip("the kernel has no Landlock")
	}
}

func TestSandboxHidesPathsAndOpensTheRest(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "secrets", "token"), "manager-token")
	write(t, filepath.Join(dir, "secrets", "run", "own"), "the run's own")
	write(t, filepath.Join(dir, "public", "file"), "public")
	// A symbolic link beside the hidden directory that points into it must not open it.
	if err := os.Symlink(filepath.Join(dir, "secrets"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	s, err := New([]string{filepath.Join(dir, "secrets")}, []string{filepath.Join(dir, "secrets", "run")})
	if err != nil {
		t.Fatal(err)
	}
	// Unconfined, every file reads: the checks below can fail.
	if out, err := run(t, nil, "/bin/cat", filepath.Join(dir, "secrets", "token")); err != nil || out != "manager-token" {
		t.Fatalf("without the sandbox: %q, %v", out, err)
	}
	for _, hidden := range []string{
		filepath.Join(dir, "secrets", "token"),
		filepath.Join(dir, "link", "token"),
	} {
		out, err := run(t, s, "/bin/cat", hidden)
		if err == nil || strings.Contains(out, "manager-token") || !strings.Contains(out, "Permission denied") {
			t.Errorf("cat %s in the sandbox: %q, %v; want permission denied", hidden, out, err)
		}
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "public", "file"):        "public",
		filepath.Join(dir, "secrets", "run", "own"): "the run's own",
	} {
		if out, err := run(t, s, "/bin/cat", path); err != nil || out != want {
			t.Errorf("cat %s in the sandbox: %q, %v; want %q", path, out, err, want)
		}
	}
	// Names in a hidden directory can be listed; writing beside it works.
	if out, err := run(t, s, "/bin/ls", filepath.Join(dir, "secrets")); err != nil || !strings.Contains(out, "token") {
		t.Errorf("ls of the hidden directory: %q, %v", out, err)
	}
	if out, err := run(t, s, "/bin/cp", filepath.Join(dir, "public", "file"), filepath.Join(dir, "public", "copy")); err != nil {
		t.Errorf("cp beside the hidden directory: %q, %v", out, err)
	}
}

// asUser runs cmd as the unprivileged user 65532 when the test runs as root (root reads any
// process's environ whatever Landlock says); else as the test's own user.
func asUser(cmd *exec.Cmd) *exec.Cmd {
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	}
	return cmd
}

func TestSandboxKeepsOtherProcessesOutOfReach(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	s, err := New([]string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The process that holds the credentials, as the same user as the run.
	holder := asUser(exec.Command("/bin/sleep", "60"))
	holder.Env = []string{"SECRET_MARK=held-by-the-manager"}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	proc := "/proc/" + strconv.Itoa(holder.Process.Pid)
	read := func(s *Sandbox, args ...string) (string, error) {
		exe, env := s.Command(args[0], map[string]string{"PATH": os.Getenv("PATH")})
		cmd := asUser(exec.Command(exe, args[1:]...))
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Unconfined, the same user reads the holder's environment: the checks below can fail.
	if out, err := read(nil, "/bin/cat", proc+"/environ"); err != nil || !strings.Contains(out, "held-by-the-manager") {
		t.Fatalf("without the sandbox, %s/environ: %q, %v", proc, out, err)
	}
	for _, p := range []string{proc + "/environ", proc + "/mem", proc + "/root/etc/hostname"} {
		if out, err := read(s, "/bin/cat", p); err == nil || strings.Contains(out, "held-by-the-manager") {
			t.Errorf("cat %s in the sandbox succeeded: %q", p, out)
		}
	}
	if ABI() >= 6 {
		if out, err := read(s, "/bin/sh", "-c", "kill -0 "+strconv.Itoa(holder.Process.Pid)); err == nil {
			t.Errorf("a signal from the sandbox to a process outside it was delivered: %q", out)
		}
	}
}

func TestEnterRefusesABadSpecWithoutRunningIt(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{envSpec + `={"exec":"cat","hide":["/nonexistent"]}`}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != ExitSandboxFailed || !strings.Contains(string(out), "not an absolute path") {
		t.Fatalf("got %q, %v; want exit %d saying the command is not an absolute path", out, err, ExitSandboxFailed)
	}
}

func TestNewRefusesToHideTheRoot(t *testing.T) {
	needLandlock(t)
	if _, err := New([]string{"/"}, nil); err == nil {
		t.Fatal("hiding / was accepted")
	}
}

func TestNilSandboxLeavesTheCommandAlone(t *testing.T) {
	var s *Sandbox
	env := map[string]string{"A": "1"}
	path, got := s.Command("/bin/true", env)
	if path != "/bin/true" || len(got) != 1 || got["A"] != "1" {
		t.Fatalf("nil sandbox rewrote the command: %s %v", path, got)
	}
}
