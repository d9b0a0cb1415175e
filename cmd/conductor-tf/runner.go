package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/conductor-tf/conductor-tf/internal/runners"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
)

// runnerMain is `conductor-tf runner`: a runner of an InfraRunnerPool. It pulls runs from the
// manager's run protocol server and runs them with its own pool; it needs no Kubernetes
// credentials, only the projected token of the run protocol's audience and the manager's CA.
func runnerMain(args []string) error {
	fs, o := runnerFlags(thisMachine())
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.pool == "" || o.manager == "" || o.stateURL == "" || o.caFile == "" || o.tokenFile == "" {
		return fmt.Errorf("runner: --pool, --manager, --state-url, --ca-file and --token-file are required")
	}
	ca, err := os.ReadFile(o.caFile)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(o.manager)
	if err != nil {
		return fmt.Errorf("--manager: %w", err)
	}
	tlsConfig, err := runners.ClientConfig(ca, host)
	if err != nil {
		return fmt.Errorf("--ca-file: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	bin, err := tfrunner.FindBinary(ctx, tfrunner.FindOptions{ExplicitPath: o.terraformPath})
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("runner", o.name, "pool", o.pool)
	// The run-protocol token is this runner's identity: no run may read it.
	runsDir := filepath.Join(o.workDir, "runs")
	env := runEnv(o.workDir, splitList(o.runEnv))
	if _, err := ensureCLIConfig(env, o.workDir); err != nil {
		return err
	}
	if bin.Sandbox, err = newSandbox(o.runSandbox, sandboxSetup{
		workDir: o.workDir, binary: bin.Path, env: env,
		hide: []string{o.tokenFile}, read: splitList(o.sandboxRead), write: splitList(o.sandboxWrite),
	}, func(f string, a ...any) { log.Info(fmt.Sprintf(f, a...)) }); err != nil {
		return err
	}
	if err := makeRunDirs(env); err != nil {
		return err
	}
	runs, err := tfrunner.NewPool(tfrunner.PoolOptions{
		Binary: bin, Dir: runsDir, Env: env, MaxConcurrent: o.concurrency, GracePeriod: o.grace,
	})
	if err != nil {
		return err
	}
	log.Info("runner starting", "manager", o.manager, "binary", bin.String(), "concurrency", o.concurrency)
	r := &runners.Runner{
		Name: o.name, Pool: o.pool, Manager: o.manager, StateURL: o.stateURL, TLS: tlsConfig, TokenFile: o.tokenFile,
		Runs: runs, Concurrency: o.concurrency, HeartbeatInterval: o.heartbeat, Log: log, DrainTimeout: o.drain,
	}
	err = r.Run(ctx)
	waitCtx, cancel := context.WithTimeout(context.Background(), o.drain+o.grace+10*time.Second)
	defer cancel()
	runs.Wait(waitCtx)
	return err
}
