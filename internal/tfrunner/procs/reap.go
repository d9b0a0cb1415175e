package procs

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// EnvWorkspace is set, in the environment of every command a workspace runs, to the workspace's
// directory. Terraform passes its environment on to the provider plugins and provisioners it
// starts, so every process of a run carries it, whoever its parent is by then.
const EnvWorkspace = "CONDUCTOR_TF_WORKSPACE"

// Reap kills (SIGKILL) every process that carries EnvWorkspace naming dir or, with tree set, any
// directory under dir, except the calling process: what a run left behind when its Terraform
// process ended without stopping its children (killed, or crashed). A killed tofu leaves its
// provider plugins running, re-parented to init; terraform-exec puts Terraform in a process group
// of its own, but plugins outlive the group leader. It reads /proc/<pid>/environ, so it sees only
// processes of the same user (others are skipped), on Linux; elsewhere it finds nothing. It returns
// how many processes it killed.
func Reap(dir string, tree bool) int { return Signal(dir, tree, syscall.SIGKILL) }

// ReapKeys kills (SIGKILL) every process of a run in a workspace of dir (a Pool's Dir) whose key
// (the directory under dir its EnvWorkspace names) match accepts, except the calling process: the
// runs of the resources a replica stopped serving, killed at once. It returns how many it killed;
// on what it sees, as Reap.
func ReapKeys(dir string, match func(key string) bool) int {
	prefix := []byte(EnvWorkspace + "=" + filepath.Clean(dir) + "/")
	return signalWhere(func(env []byte) bool {
		for _, kv := range bytes.Split(env, []byte{0}) {
			if rest, ok := bytes.CutPrefix(kv, prefix); ok {
				key, _, _ := bytes.Cut(rest, []byte{'/'})
				return len(key) > 0 && match(string(key))
			}
		}
		return false
	}, syscall.SIGKILL)
}

// Signal sends sig to every process that carries EnvWorkspace naming dir (or, with tree, a
// directory under it), except the calling process; it returns how many it signalled (sig 0:
// how many there are, signalling none).
func Signal(dir string, tree bool, sig syscall.Signal) int {
	want := []byte(EnvWorkspace + "=" + filepath.Clean(dir))
	return signalWhere(func(env []byte) bool { return carries(env, want, tree) }, sig)
}

// signalWhere sends sig to every process but the calling one whose NUL-separated environment
// (/proc/<pid>/environ) picked accepts; it returns how many it signalled.
func signalWhere(picked func(env []byte) bool, sig syscall.Signal) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	self := os.Getpid()
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !picked(env) {
			continue
		}
		if syscall.Kill(pid, sig) == nil {
			killed++
		}
	}
	return killed
}

// carries reports whether the NUL-separated environment env holds the entry want exactly, or,
// with tree, an entry of which want is a path prefix.
func carries(env, want []byte, tree bool) bool {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
		if tree && bytes.HasPrefix(kv, want) && len(kv) > len(want) && kv[len(want)] == '/' {
			return true
		}
	}
	return false
}
