package warm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/conductor-tf/conductor-tf/internal/tfrunner/procs"
)

// randomProvider is the random provider of the tools' mirror, as a workspace would list it.
func randomProvider(t testing.TB) Binary {
	paths, _ := filepath.Glob(filepath.Join(os.Getenv("CONDUCTOR_TF_PROVIDER_MIRROR"), "registry.terraform.io", "hashicorp", "random", "*", "*", "terraform-provider-random*"))
	if len(paths) == 0 {
		t.Fatal("no random provider in CONDUCTOR_TF_PROVIDER_MIRROR: run with the tools' environment")
	}
	return Binary{Address: "registry.opentofu.org/hashicorp/random", Path: paths[0]}
}

// lockFor writes a dependency lock file that locks pb's package by its h1 hash, as init writes it.
func lockFor(t testing.TB, pb Binary) string {
	t.Helper()
	h1, err := dirhash.HashDir(filepath.Dir(pb.Path), "", dirhash.Hash1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), ".terraform.lock.hcl")
	lock := "provider \"" + pb.Address + "\" {\n  version = \"3.0.0\"\n  hashes = [\n    \"" + h1 + "\",\n    \"zh:00\",\n  ]\n}\n"
	if err := os.WriteFile(path, []byte(lock), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestWarmProviderRefusesAPackageChangedAfterInit: a provider binary that no longer matches the
// lock file's h1 hash is not started (issue 44: a planted binary in the plugin cache).
func TestWarmProviderRefusesAPackageChangedAfterInit(t *testing.T) {
	real := randomProvider(t)
	dir := filepath.Join(t.TempDir(), "linux_amd64")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(real.Path)
	if err != nil {
		t.Fatal(err)
	}
	pb := Binary{Address: real.Address, Path: filepath.Join(dir, filepath.Base(real.Path))}
	if err := os.WriteFile(pb.Path, data, 0o700); err != nil {
		t.Fatal(err)
	}
	lock := lockFor(t, pb)
	wp := New(t.TempDir()) // deep: its sockets go where a socket's path fits
	defer wp.Close()
	env := map[string]string{"PATH": os.Getenv("PATH")}
	_, _, release, err := wp.Checkout(context.Background(), []Binary{pb}, lock, Owner{Tenant: "t", Class: "c", Source: "./m"}, env)
	if err != nil {
		t.Fatalf("the package as locked: %v", err)
	}
	release(false)
	_ = os.Remove(pb.Path) // the killed process may still hold it: a new file in its place
	if err := os.WriteFile(pb.Path, append(data, 0), 0o700); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = wp.Checkout(context.Background(), []Binary{pb}, lock, Owner{Tenant: "t", Class: "c", Source: "./m"}, env)
	if err == nil || !strings.Contains(err.Error(), "matches no h1 hash") {
		t.Fatalf("a changed package: %v; want it refused", err)
	}
	if wp.Started() != 1 {
		t.Errorf("started %d processes, want only the one of the locked package", wp.Started())
	}
}

// checkoutOne takes one process for the random provider for a run of class "c1" and returns its
// pid and release.
func checkoutOne(t *testing.T, wp *Providers, pb Binary, tenant string, env map[string]string) (int, func(bool)) {
	t.Helper()
	return checkoutClass(t, wp, pb, tenant, "c1", env)
}

func checkoutClass(t *testing.T, wp *Providers, pb Binary, tenant, class string, env map[string]string) (int, func(bool)) {
	t.Helper()
	info, dirs, release, err := wp.Checkout(context.Background(), []Binary{pb}, lockFor(t, pb), Owner{Tenant: tenant, Class: class, Source: "./m", Version: "v1"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 1 || !strings.HasPrefix(info[pb.Address].Addr.String, dirs[0]+"/") {
		t.Fatalf("the socket %s is not in the directory %v the run is granted", info[pb.Address].Addr.String, dirs)
	}
	cfg, ok := info[pb.Address]
	if !ok || cfg.Pid == 0 || cfg.Addr.String == "" {
		t.Fatalf("reattach info %+v has no process for %s", info, pb.Address)
	}
	return cfg.Pid, release
}

// TestWarmProvidersIsolation: a process serves one run at a time (a second run at once gets its
// own), is reused by a later run of the same key, never by another tenant, another class or another
// environment (the run's credentials), and is killed after a failed run and at MaxRuns.
func TestWarmProvidersIsolation(t *testing.T) {
	wp := New(t.TempDir())
	defer wp.Close()
	pb := randomProvider(t)
	env := map[string]string{"PATH": os.Getenv("PATH"), "TF_HTTP_PASSWORD": "run-1"}

	a, releaseA := checkoutOne(t, wp, pb, "team-a", env)
	b, releaseB := checkoutOne(t, wp, pb, "team-a", env)
	if a == b {
		t.Fatalf("two runs at once share provider process %d", a)
	}
	releaseA(true)
	releaseB(true)
	env["TF_HTTP_PASSWORD"] = "run-2" // the state server's per-run credentials do not split keys
	c, releaseC := checkoutOne(t, wp, pb, "team-a", env)
	if c != a && c != b {
		t.Errorf("a later run of the same key got a new process %d, want %d or %d", c, a, b)
	}
	releaseC(true)
	if wp.Started() != 2 {
		t.Errorf("started %d processes, want 2", wp.Started())
	}

	other, releaseOther := checkoutOne(t, wp, pb, "team-b", env)
	if other == a || other == b {
		t.Errorf("another tenant's run got team-a's process %d", other)
	}
	releaseOther(true)
	// Another class of the same module, tenant and environment: its own process (issue 33).
	otherClass, releaseOtherClass := checkoutClass(t, wp, pb, "team-a", "c2", env)
	if otherClass == a || otherClass == b {
		t.Errorf("a run of another class got class c1's process %d", otherClass)
	}
	releaseOtherClass(true)
	creds := map[string]string{"PATH": os.Getenv("PATH"), "AWS_SECRET_ACCESS_KEY": "another"}
	withCreds, releaseCreds := checkoutOne(t, wp, pb, "team-a", creds)
	if withCreds == a || withCreds == b {
		t.Errorf("a run with other credentials got process %d of a run without them", withCreds)
	}

	releaseCreds(false)
	waitGone(t, withCreds, "after a failed run")
	wp.MaxRuns = 1
	d, releaseD := checkoutOne(t, wp, pb, "team-a", env)
	releaseD(true)
	waitGone(t, d, "after MaxRuns")
}

// BenchmarkWarmProviderStart: the time from starting the random provider to holding the reattach
// information for it (a warm provider ready for a run), then killing it.
func BenchmarkWarmProviderStart(b *testing.B) {
	wp := New(b.TempDir())
	pb := randomProvider(b)
	env := map[string]string{"PATH": os.Getenv("PATH")}
	for b.Loop() {
		p, err := wp.start(context.Background(), pb, "k", env)
		if err != nil {
			b.Fatal(err)
		}
		if p.config.Pid == 0 || p.config.Addr.String == "" || p.config.ProtocolVersion == 0 {
			b.Fatalf("reattach config %+v", p.config)
		}
		p.kill()
	}
}

// TestWarmProviderStartCancelled: a start whose context ends first fails with the context's error
// and leaves no provider process behind.
func TestWarmProviderStartCancelled(t *testing.T) {
	dir := t.TempDir()
	wp := New(dir)
	defer wp.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := wp.providerEnv(map[string]string{"PATH": os.Getenv("PATH")}) // procs.EnvWorkspace names dir
	if _, err := wp.start(ctx, randomProvider(t), "k", env); !errors.Is(err, context.Canceled) {
		t.Fatalf("start with a cancelled context: %v, want context.Canceled", err)
	}
	time.Sleep(300 * time.Millisecond) // a process started after the cancel is started by now
	deadline := time.Now().Add(5 * time.Second)
	for procs.Signal(dir, false, 0) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("a provider process of a cancelled start still runs")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if wp.Started() != 0 {
		t.Errorf("started %d, want 0", wp.Started())
	}
}

// TestWarmProvidersIdleTimeout: a process idle for longer than IdleTimeout is killed.
func TestWarmProvidersIdleTimeout(t *testing.T) {
	wp := New(t.TempDir())
	defer wp.Close()
	wp.IdleTimeout = 100 * time.Millisecond
	pb := randomProvider(t)
	env := map[string]string{"PATH": os.Getenv("PATH")}
	a, release := checkoutOne(t, wp, pb, "t", env)
	release(true)
	time.Sleep(300 * time.Millisecond)
	b, release := checkoutOne(t, wp, pb, "t", env)
	release(false)
	if a == b {
		t.Fatal("a process idle past IdleTimeout was reused")
	}
	waitGone(t, a, "idle past IdleTimeout")
}

func waitGone(t *testing.T, pid int, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err != nil || isZombie(b) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("provider process %d still runs %s", pid, when)
}

// isZombie reports a /proc/<pid>/stat whose state is Z (exited, not reaped yet).
func isZombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// TestWarmProvidersNeverForAliases: a module that declares a provider alias, or
// configuration_aliases, is never served warm (every alias's configuration would reach the one
// process); a provider not listed is never warm either.
func TestWarmProvidersNeverForAliases(t *testing.T) {
	write := func(body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	cases := map[string]bool{
		`provider "random" {}`:               false,
		`provider "random" { alias = "dr" }`: true,
		`terraform {
  required_providers {
    random = { source = "hashicorp/random", configuration_aliases = [random.dr] }
  }
}`: true,
	}
	for body, want := range cases {
		if got := declaresAliases(write(body)); got != want {
			t.Errorf("declaresAliases(%q) = %v, want %v", body, got, want)
		}
	}
	wp := New(t.TempDir())
	wp.Providers = []string{"hashicorp/random"}
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, ".terraform", "modules"), 0o700); err != nil {
		t.Fatal(err)
	}
	manifest := func(dir string) {
		data := []byte(`{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"main","Source":"x","Dir":"` + dir + `"}]}`)
		if err := os.WriteFile(filepath.Join(work, ".terraform", "modules", "modules.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	provs := []Binary{{Address: "registry.opentofu.org/hashicorp/random"}, {Address: "registry.opentofu.org/hashicorp/local"}}
	manifest(write(`provider "random" {}`))
	if got := wp.Warmable(work, provs); len(got) != 1 || got[0].Address != provs[0].Address {
		t.Errorf("warmable without aliases = %v, want only the listed random provider", got)
	}
	manifest(write(`provider "random" { alias = "dr" }`))
	if got := wp.Warmable(work, provs); len(got) != 0 {
		t.Errorf("warmable with an alias in module main = %v, want none", got)
	}
}
