package tfrunner_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

// processesOf lists, by pid, the command names of the processes whose environment carries
// procs.EnvWorkspace=dir.
func processesOf(dir string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	want := []byte(procs.EnvWorkspace + "=" + dir + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		out[pid] = strings.TrimSpace(string(comm))
	}
	return out
}

// TestKilledRunLeavesNoProcess kills Terraform (SIGKILL, as the OOM killer or a node would) while
// its provider plugin and a provisioner run: when the run returns, none of its processes is left.
// Before Reap, terraform-provider-random and the provisioner's sleep outlived the run (issue 17).
func TestKilledRunLeavesNoProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := bins[0]
	tfEnv, err := harness.TerraformEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pool, err := tfrunner.NewPool(tfrunner.PoolOptions{Binary: bin, Dir: dir, Env: tfEnv, MaxConcurrent: 1, GracePeriod: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs(filepath.Join("testdata", "modules", "slowplugin"))
	backend := statebackend.Config{Namespace: "default", KubeconfigPath: env.Kubeconfig}
	spec := tfrunner.Spec{Module: tfrunner.Module{Source: src},
		Backend: tfrunner.Backend{Type: "kubernetes", Config: backend.Attributes(statebackend.SuffixFor("reap"), nil)}}
	done := make(chan error, 1)
	go func() {
		_, err := pool.Apply(ctx, "reap", spec, tfrunner.ApplyOptions{})
		done <- err
	}()
	wsDir := filepath.Join(dir, "reap")
	// Terraform starts the local provider beside the provisioner, not before it (the provider's
	// node does not wait for terraform_data.slow): a listing the moment sleep appears can hold the
	// provider still as a forked, not yet exec'd "tofu" (CI: map[tofu sh sleep tofu]). Both are
	// awaited, each named if it never comes.
	var procs map[int]string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		procs = processesOf(wsDir)
		if hasComm(procs, "sleep") && hasCommPrefix(procs, "terraform-provi") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provisioner (sleep: %v) and the provider plugin (terraform-provi*: %v) never ran together; processes of the run: %v",
				hasComm(procs, "sleep"), hasCommPrefix(procs, "terraform-provi"), procs)
		}
	}
	for pid, comm := range procs {
		if comm == string(bin.Flavor) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if err := <-done; err == nil {
		t.Fatal("the killed apply succeeded")
	}
	// Reap's kills are delivered asynchronously; a killed process is gone (or a zombie) at once.
	time.Sleep(500 * time.Millisecond)
	if left := alive(processesOf(wsDir)); len(left) > 0 {
		t.Errorf("processes of the killed run still running after it returned: %v", left)
	}
}

func hasComm(procs map[int]string, comm string) bool {
	for _, c := range procs {
		if c == comm {
			return true
		}
	}
	return false
}

func hasCommPrefix(procs map[int]string, prefix string) bool {
	for _, c := range procs {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// alive drops zombies (state Z: dead, waiting for their parent to reap them).
func alive(procs map[int]string) map[int]string {
	out := map[int]string{}
	for pid, comm := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue
		}
		out[pid] = comm
	}
	return out
}

// ReapKeys kills the processes of the runs of the keys it is given, under the pool's directory,
// whichever subdirectory of their workspace they name, and leaves every other run alone: what a
// replica kills of the resources whose share it lost.
func TestReapKeysKillsOnlyTheKeysGiven(t *testing.T) {
	dir := t.TempDir()
	start := func(ws string) *os.Process {
		p, err := os.StartProcess("/bin/sleep", []string{"sleep", "60"}, &os.ProcAttr{
			Env: []string{procs.EnvWorkspace + "=" + ws}, Files: []*os.File{nil, nil, nil}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Kill(); _, _ = p.Wait() })
		return p
	}
	lost := []*os.Process{start(filepath.Join(dir, "res-a")), start(filepath.Join(dir, "res-b", "sub"))}
	kept := []*os.Process{start(filepath.Join(dir, "res-c")), start(filepath.Join(dir+"x", "res-a"))}
	killed := procs.ReapKeys(dir, func(key string) bool { return key == "res-a" || key == "res-b" })
	if killed != 2 {
		t.Fatalf("ReapKeys killed %d processes, want 2", killed)
	}
	for _, p := range lost {
		st, err := p.Wait()
		if err != nil || st.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("process %d of a lost key: %v, %v", p.Pid, st, err)
		}
	}
	for _, p := range kept {
		if err := p.Signal(syscall.Signal(0)); err != nil {
			t.Fatalf("process %d of another key was killed: %v", p.Pid, err)
		}
	}
}
