//go:build scale

package scale_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

var cpuProfile = flag.String("cpuprofile", "", "write the manager's CPU profile while claims go to Ready to this file (read it with go tool pprof -top)")

// pprofArgs returns the manager's flag serving /debug/pprof on a free loopback port, and that
// address; none when no profile was asked for.
func pprofArgs(t *testing.T) ([]string, string) {
	if *cpuProfile == "" {
		return nil, ""
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return []string{"--pprof-bind-address", addr}, addr
}

// profileManager samples the manager's CPU in windows of 5 s from addr until the returned stop is
// called, then merges the windows (google/pprof's profile.Merge) into *cpuProfile. Nothing
// happens when addr is empty.
func profileManager(t *testing.T, addr string) (stop func()) {
	if addr == "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []*profile.Profile)
	go func() {
		var windows []*profile.Profile
		for ctx.Err() == nil {
			if p, err := fetchProfile(ctx, addr, 5); err == nil {
				windows = append(windows, p)
			} else if ctx.Err() == nil {
				t.Logf("CPU profile window: %v", err)
				time.Sleep(time.Second)
			}
		}
		done <- windows
	}()
	return func() {
		cancel()
		windows := <-done
		if len(windows) == 0 {
			t.Logf("no CPU profile window was taken")
			return
		}
		merged, err := profile.Merge(windows)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(*cpuProfile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := merged.Write(f); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("manager CPU profile (%d windows of 5 s): go tool pprof -top %s\n", len(windows), *cpuProfile)
	}
}

// fetchProfile takes one CPU profile of seconds from the manager's /debug/pprof/profile.
func fetchProfile(ctx context.Context, addr string, seconds int) (*profile.Profile, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	return profile.Parse(bytes.NewReader(body))
}
