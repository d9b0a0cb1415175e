// Command hostile is what a compromised module runs (test/access, issue 44): from inside a run it
// tries every route by which one class's run could change what another class's runs execute or
// reach, and reports each try on its own line:
//
//	write PATH denied|WROTE        append to a file, or create one in a directory, named by -targets
//	proc denied|READABLE           open /proc/net/unix (every bound socket's path) and /proc/1/environ
//	socket PATH                    a Unix socket it found (by listing what it can, and /proc/net/unix)
//	connect PATH refused|CONNECTED connect to each socket found, and to each named by -targets
//	signal PID delivered           a process outside its own run that it could signal (SIGCONT)
//
// The -targets file lists "write PATH" and "connect PATH" lines. What it appends to a .tf file is
// a resource whose local-exec creates -marker: if any write lands, the next run of that module
// leaves the marker behind.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	report := flag.String("report", "", "file the findings are written to")
	targets := flag.String("targets", "", "file of write and connect targets")
	marker := flag.String("marker", "", "file planted code would create")
	flag.Parse()
	out, err := os.Create(*report)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer out.Close()
	w := bufio.NewWriter(out)
	defer w.Flush()

	var connects []string
	if data, err := os.ReadFile(*targets); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			verb, path, ok := strings.Cut(line, " ")
			switch {
			case !ok:
			case verb == "write":
				fmt.Fprintf(w, "write %s %s\n", path, verdict(plant(path, *marker)))
			case verb == "connect":
				connects = append(connects, path)
			}
		}
	}
	for _, p := range []string{"/proc/net/unix", "/proc/1/environ"} {
		_, err := os.ReadFile(p)
		fmt.Fprintf(w, "proc %s %s\n", p, map[bool]string{true: "READABLE", false: "denied"}[err == nil])
	}
	for _, s := range findSockets() {
		fmt.Fprintf(w, "socket %s\n", s)
		connects = append(connects, s)
	}
	for _, s := range connects {
		c, err := net.DialTimeout("unix", s, 2*time.Second)
		if err == nil {
			c.Close()
			fmt.Fprintf(w, "connect %s CONNECTED\n", s)
		} else {
			fmt.Fprintf(w, "connect %s refused\n", s)
		}
	}
	for _, pid := range signalable() {
		fmt.Fprintf(w, "signal %d delivered\n", pid)
	}
}

func verdict(err error) string {
	if err == nil {
		return "WROTE"
	}
	return "denied"
}

// plant appends planted code to a file (a .tf file gets a resource that creates marker), or
// creates a file in a directory.
func plant(path, marker string) error {
	fi, err := os.Stat(path)
	if err == nil && fi.IsDir() {
		return os.WriteFile(filepath.Join(path, ".planted"), []byte("planted\n"), 0o644)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return os.WriteFile(path, []byte("provider_installation {\n  direct {}\n}\n"), 0o644)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	code := "\n# planted\n"
	if strings.HasSuffix(path, ".tf") {
		code = fmt.Sprintf("\nresource \"terraform_data\" \"planted_%d\" {\n  provisioner \"local-exec\" {\n    command = \"touch %s\"\n  }\n}\n", time.Now().UnixNano(), marker)
	}
	_, err = f.WriteString(code)
	return err
}

// findSockets lists the Unix sockets it can find: by walking every directory it may list (but
// /sys), and in /proc/net/unix when it can read it.
func findSockets() []string {
	var found []string
	_ = filepath.WalkDir("/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && (p == "/sys" || p == "/proc") {
			return filepath.SkipDir
		}
		if d.Type()&fs.ModeSocket != 0 {
			found = append(found, p)
		}
		return nil
	})
	if data, err := os.ReadFile("/proc/net/unix"); err == nil {
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) >= 8 && strings.HasPrefix(f[7], "/") {
				found = append(found, f[7])
			}
		}
	}
	return found
}

// signalable returns the processes outside its own run that it can signal: it probes every PID
// up to the kernel's largest (signal 0), and sends SIGCONT, which stops nothing, to those that
// answer. Its own run's processes (this one, its parents in the run) are left out.
func signalable() []int {
	own := map[int]bool{os.Getpid(): true, os.Getppid(): true}
	var out []int
	for pid := 1; pid <= 1<<22; pid++ {
		if own[pid] {
			continue
		}
		if err := syscall.Kill(pid, 0); err != nil {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGCONT); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
