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
	"time"
)

func TestMain(m *testing.M) {
	Enter()
	os.Exit(m.Run())
}

// run starts path with args, rewritten by s with access, and returns its combined output and error.
func run(t *testing.T, s *Sandbox, a Access, path string, args ...string) (string, error) {
	t.Helper()
	exe, env := s.Command(path, map[string]string{"PATH": os.Getenv("PATH"), "SECRET_MARK": "in-the-parent"}, a)
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

// sh runs a shell command in s with access a.
func sh(t *testing.T, s *Sandbox, a Access, script string) (string, error) {
	t.Helper()
	return run(t, s, a, "/bin/sh", "-c", script)
}

func TestSandboxGrantsOnlyWhatItLists(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "shared", "module.tf"), "shared")
	write(t, filepath.Join(dir, "ws", "main.tf"), "own")
	write(t, filepath.Join(dir, "other", "vars"), "another run's")
	write(t, filepath.Join(dir, "mirror", "provider"), "mirror")
	write(t, filepath.Join(dir, "mirror", "secrets", "token"), "manager-token")
	s, err := New(Access{Read: []string{filepath.Join(dir, "mirror")}}, []string{filepath.Join(dir, "mirror", "secrets"), filepath.Join(dir, "other")})
	if err != nil {
		t.Fatal(err)
	}
	a := Access{Read: []string{filepath.Join(dir, "shared")}, Write: []string{filepath.Join(dir, "ws")}}
	// Unconfined, every one of these succeeds: the checks below can fail.
	for _, script := range []string{"cat " + dir + "/other/vars", "echo x >> " + dir + "/shared/module.tf", "cat /proc/self/status"} {
		if out, err := sh(t, nil, Access{}, script); err != nil {
			t.Fatalf("without the sandbox, %s: %q, %v", script, out, err)
		}
	}
	write(t, filepath.Join(dir, "shared", "module.tf"), "shared")
	allowed := []string{
		"cat " + dir + "/shared/module.tf", // read grant
		"cat " + dir + "/mirror/provider",  // the sandbox's base
		"echo new > " + dir + "/ws/new.tf", // its own workspace
		"mkdir " + dir + "/ws/home && rm -r " + dir + "/ws/home",
		"echo x > /dev/null",                                         // devices
		"cat /etc/hostname >/dev/null || cat /etc/passwd >/dev/null", // the system
	}
	for _, script := range allowed {
		if out, err := sh(t, s, a, script); err != nil {
			t.Errorf("in the sandbox, %s: %q, %v; want it allowed", script, out, err)
		}
	}
	refused := []string{
		"echo x >> " + dir + "/shared/module.tf", // read only
		"touch " + dir + "/shared/planted.tf",    // no creating in a read grant
		"cat " + dir + "/other/vars",             // not granted
		"cat " + dir + "/mirror/secrets/token",   // hidden inside a grant
		"touch " + os.TempDir() + "/planted",     // no shared TMPDIR
		"cat /proc/self/status",                  // no /proc (it lists every socket's path)
		"touch /dev/planted",                     // devices: existing files only
	}
	for _, script := range refused {
		if out, err := sh(t, s, a, script); err == nil || !strings.Contains(out, "denied") {
			t.Errorf("in the sandbox, %s: %q, %v; want permission denied", script, out, err)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "shared", "module.tf")); string(got) != "shared" {
		t.Errorf("the read-only file changed: %q", got)
	}
}

func TestSandboxHiddenPathsStayShutBehindLinks(t *testing.T) {
	needLandlock(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "secrets", "token"), "manager-token")
	write(t, filepath.Join(dir, "public", "file"), "public")
	// A symbolic link beside the hidden directory that points into it must not open it.
	if err := os.Symlink(filepath.Join(dir, "secrets"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	s, err := New(Access{Read: []string{dir}}, []string{filepath.Join(dir, "secrets")})
	if err != nil {
		t.Fatal(err)
	}
	for _, hidden := range []string{filepath.Join(dir, "secrets", "token"), filepath.Join(dir, "link", "token")} {
		out, err := run(t, s, Access{}, "/bin/cat", hidden)
		if err == nil || strings.Contains(out, "manager-token") || !strings.Contains(out, "Permission denied") {
			t.Errorf("cat %s in the sandbox: %q, %v; want permission denied", hidden, out, err)
		}
	}
	if out, err := run(t, s, Access{}, "/bin/cat", filepath.Join(dir, "public", "file")); err != nil || out != "public" {
		t.Errorf("cat of a file beside the hidden directory: %q, %v", out, err)
	}
	// An explicit write grant inside a hidden path opens it (the run's own workspace in the runs
	// directory).
	own := filepath.Join(dir, "secrets", "run")
	write(t, filepath.Join(own, "own"), "the run's own")
	if out, err := run(t, s, Access{Write: []string{own}}, "/bin/cat", filepath.Join(own, "own")); err != nil || out != "the run's own" {
		t.Errorf("cat of the run's own file: %q, %v", out, err)
	}
	// Trusted paths too (a shared init in the hidden work directory); a Read grant (what a class
	// names) does not open a hidden path, even when it names it.
	if out, err := run(t, s, Access{Trusted: []string{own}}, "/bin/cat", filepath.Join(own, "own")); err != nil || out != "the run's own" {
		t.Errorf("cat of a trusted file: %q, %v", out, err)
	}
	if out, err := run(t, s, Access{Read: []string{own, "/"}}, "/bin/cat", filepath.Join(own, "own")); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("cat of a hidden file granted by Read: %q, %v; want permission denied", out, err)
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
	s, err := New(Access{}, []string{dir})
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
		exe, env := s.Command(args[0], map[string]string{"PATH": os.Getenv("PATH")}, Access{})
		cmd := asUser(exec.Command(exe, args[1:]...))
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Unconfined, the same user reads the holder's environment: the checks below can fail. Start
	// returns once execve has closed the child's close-on-exec pipe, before the kernel has set up the
	// new environment's addresses, so environ reads empty for a moment on a busy machine (seen in CI).
	var out string
	for range 50 {
		if out, err = read(nil, "/bin/cat", proc+"/environ"); err != nil || out != "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !strings.Contains(out, "held-by-the-manager") {
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
	cmd.Env = []string{envSpec + `={"exec":"cat","access":{},"hide":["/nonexistent"]}`}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != ExitSandboxFailed || !strings.Contains(string(out), "not an absolute path") {
		t.Fatalf("got %q, %v; want exit %d saying the command is not an absolute path", out, err, ExitSandboxFailed)
	}
}

func TestNewRefusesToHideTheRoot(t *testing.T) {
	needLandlock(t)
	if _, err := New(Access{}, []string{"/"}); err == nil {
		t.Fatal("hiding / was accepted")
	}
}

func TestNilSandboxLeavesTheCommandAlone(t *testing.T) {
	var s *Sandbox
	env := map[string]string{"A": "1"}
	path, got := s.Command("/bin/true", env, Access{Write: []string{"/"}})
	if path != "/bin/true" || len(got) != 1 || got["A"] != "1" {
		t.Fatalf("nil sandbox rewrote the command: %s %v", path, got)
	}
}
