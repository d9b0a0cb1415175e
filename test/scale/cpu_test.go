//go:build scale

package scale_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc CPU times on Linux (100 on every common build).
const clockTicks = 100

// cpuSeconds returns the CPU time in seconds (user + system, from /proc/<pid>/stat, children not
// included) used so far by the processes of this machine named kube-apiserver, etcd and
// conductor-tf, summed by name, and "machine": the busy time of all CPUs (/proc/stat: user, nice,
// system, irq, softirq; not idle, iowait, or steal, which is another guest's), from which the rest
// (tofu, providers, the benchmark) is the difference.
func cpuSeconds() map[string]float64 {
	out := map[string]float64{}
	pids, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		name := s[open+1 : end]
		if name != "kube-apiserver" && name != "etcd" && name != "conductor-tf" {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 13 {
			continue
		}
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		out[name] += (utime + stime) / clockTicks
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line := strings.SplitN(string(b), "\n", 2)[0]
		fields := strings.Fields(line)[1:]
		// user nice system idle iowait irq softirq steal guest guest_nice: this machine's own work
		// is user, nice, system, irq and softirq (steal is another guest's; guest is in user).
		for _, i := range []int{0, 1, 2, 5, 6} {
			if i < len(fields) {
				v, _ := strconv.ParseFloat(fields[i], 64)
				out["machine"] += v / clockTicks
			}
		}
	}
	return out
}

// cpuRows tells the CPU used between before and after per claim, by process, and the rest.
func cpuRows(before, after map[string]float64, n int) string {
	var rows []string
	rest := after["machine"] - before["machine"]
	for _, name := range []string{"kube-apiserver", "etcd", "conductor-tf"} {
		d := after[name] - before[name]
		rest -= d
		rows = append(rows, fmt.Sprintf("%s %.0f ms", name, 1000*d/float64(n)))
	}
	rows = append(rows, fmt.Sprintf("everything else (tofu, providers, the benchmark) %.0f ms", 1000*rest/float64(n)))
	return strings.Join(rows, ", ")
}
