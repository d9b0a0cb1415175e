package access_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/sandbox"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/wsfs"
)

// Issue 44: a compromised module of one class tries every route by which it could change what
// another class's runs execute or reach; then a claim of another class, in another namespace, runs.
var _ = Describe("A compromised module", func() {
	It("changes nothing another class's runs execute, reaches no other class's warm provider and signals nothing outside its run (issue 44)", func() {
		ctx := context.Background()
		if sandbox.ABI() < 1 {
			Skip("the kernel has no Landlock: runs are not confined")
		}
		victims := newTeam(ctx)
		victim := class(ctx, "victim", nil, "prefix")
		first := victims.claim(ctx, "first", victim, map[string]string{"prefix": "first"})
		Eventually(victims.resourceOf(ctx, first), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))

		By("what the hostile run goes for: every file of every shared init, the plugin cache, the HOME and TMPDIR runs shared before")
		dir := reportDir()
		var targets []string
		for _, root := range []string{filepath.Join(workDir, "runs", wsfs.SharedDirName), filepath.Join(workDir, "plugin-cache")} {
			Expect(filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Type()&fs.ModeSymlink == 0 {
					targets = append(targets, "write "+p)
				}
				return err
			})).To(Succeed())
		}
		Expect(len(targets)).To(BeNumerically(">", 10), "the shared init of the victim's module and its provider are on disk")
		targets = append(targets, "write "+filepath.Join(workDir, "home", ".tofurc"), "write "+filepath.Join(workDir, "tmp"), "write /tmp")
		sockets := warmSockets()
		Expect(sockets).NotTo(BeEmpty(), "the victim's random provider waits warm")
		if sandbox.SocketsMediated() {
			// From Landlock ABI 9 the kernel refuses the connect even to a run that knows the path.
			for _, s := range sockets {
				targets = append(targets, "connect "+s)
			}
		}
		Expect(os.WriteFile(filepath.Join(dir, "targets"), []byte(strings.Join(targets, "\n")), 0o644)).To(Succeed())
		var outside []string
		for _, pid := range append(warmPids(), manager.Cmd.Process.Pid) {
			outside = append(outside, strconv.Itoa(pid))
		}

		attackers := newTeam(ctx)
		hostile := class(ctx, "hostile", nil, "tool", "report", "targets", "marker")
		marker := filepath.Join(dir, "planted-code-ran")
		attack := attackers.claim(ctx, "attack", hostile, map[string]string{
			"tool": filepath.Join(tools, "hostile"), "report": filepath.Join(dir, "report"),
			"targets": filepath.Join(dir, "targets"), "marker": marker,
		})
		Eventually(attackers.resourceOf(ctx, attack), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))
		data, err := os.ReadFile(filepath.Join(dir, "report"))
		Expect(err).NotTo(HaveOccurred())
		report := string(data)
		GinkgoWriter.Printf("the hostile run's report (%d lines), beside the targets, in %s\n", strings.Count(report, "\n"), dir)

		// Every breach is collected, so that a failure shows them all.
		var breaches []string
		tried := 0
		for _, line := range strings.Split(strings.TrimSpace(report), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "write":
				tried++
				if f[2] != "denied" {
					breaches = append(breaches, "wrote "+f[1])
				}
			case len(f) == 3 && f[0] == "proc" && f[2] != "denied":
				breaches = append(breaches, "read "+f[1])
			case len(f) == 2 && f[0] == "socket" && slices.Contains(sockets, f[1]):
				breaches = append(breaches, "found another class's warm provider at "+f[1])
			case len(f) == 3 && f[0] == "connect" && f[2] == "CONNECTED" && slices.Contains(sockets, f[1]):
				breaches = append(breaches, "connected to another class's warm provider at "+f[1])
			case len(f) == 3 && f[0] == "signal" && slices.Contains(outside, f[1]):
				breaches = append(breaches, "signalled PID "+f[1]+" outside its run (the manager or a warm provider)")
			}
		}
		Expect(tried).To(Equal(len(targets)-len(sockets)*btoi(sandbox.SocketsMediated())), "every write target was tried")

		GinkgoWriter.Printf("breaches of the hostile run (%d): %s\n", len(breaches), strings.Join(breaches, "; "))

		By("a claim of the other class, in its own namespace, runs nothing the hostile run wrote and becomes Ready")
		second := victims.claim(ctx, "second", victim, map[string]string{"prefix": "second"})
		Eventually(victims.resourceOf(ctx, second), timeout, time.Second).Should(WithTransform(ready, Equal(v1alpha1.ReasonApplied)))
		if _, err := os.Stat(marker); err == nil {
			breaches = append(breaches, "code the hostile run planted ran in the other class's run")
		}
		Expect(breaches).To(BeEmpty(), "what the hostile run achieved (%d breaches)", len(breaches))
	})
})

// warmSockets lists the Unix sockets of warm providers (go-plugin's plugin*) under the
// controller's work dir.
func warmSockets() []string {
	var out []string
	_ = filepath.WalkDir(workDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSocket != 0 && strings.HasPrefix(d.Name(), "plugin") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// warmPids lists the processes of warm providers: those whose environment names the warm
// providers' directory as their workspace.
func warmPids() []int {
	want := procs.EnvWorkspace + "=" + filepath.Join(workDir, "runs", ".warm")
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains("\x00"+string(env)+"\x00", "\x00"+want+"\x00") {
			out = append(out, pid)
		}
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
