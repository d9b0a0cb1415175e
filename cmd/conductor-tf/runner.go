package main

import (
	"context"
	"flag"
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
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	name := fs.String("name", envOr("POD_NAME", hostname()), "This runner's name, recorded with the runs it is given.")
	pool := fs.String("pool", os.Getenv("RUNNER_POOL"), "The InfraRunnerPool this runner serves.")
	manager := fs.String("manager", "", "The manager's run protocol address (host:port).")
	stateURL := fs.String("state-url", "", "The manager's state server for runners (https://host:port).")
	caFile := fs.String("ca-file", "", "PEM file of the manager's CA (the ConfigMap "+runners.CAName+").")
	tokenFile := fs.String("token-file", "", "Projected ServiceAccount token of audience "+runners.Audience+".")
	concurrency := fs.Int("concurrency", 1, "Runs this runner executes at once.")
	heartbeat := fs.Duration("heartbeat-interval", runners.DefaultHeartbeatInterval, "How often a run reports it is alive.")
	workDir := fs.String("work-dir", filepath.Join(os.TempDir(), "conductor-tf-runner"), "Working directories of runs and the plugin cache.")
	terraformPath := fs.String("terraform-path", "", "The tofu or terraform binary; else tofu, then terraform, on PATH.")
	grace := fs.Duration("grace-period", tfrunner.DefaultGracePeriod, "How long a run gets to stop after SIGINT on shutdown.")
	runSandbox := fs.String("run-sandbox", sandboxAuto, sandboxFlagUsage)
	sandboxRead := fs.String("run-sandbox-read", "", sandboxReadUsage)
	sandboxWrite := fs.String("run-sandbox-write", "", sandboxWriteUsage)
	runEnvNames := fs.String("run-env", "", runEnvUsage)
	drainTimeout := fs.Duration("drain-timeout", DefaultDrainTimeout, "On SIGTERM, how long runs under way go on before they are interrupted (SIGINT, then --grace-period); no run is taken meanwhile. The pod's terminationGracePeriodSeconds must cover it and the grace period.")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pool == "" || *manager == "" || *stateURL == "" || *caFile == "" || *tokenFile == "" {
		return fmt.Errorf("runner: --pool, --manager, --state-url, --ca-file and --token-file are required")
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*manager)
	if err != nil {
		return fmt.Errorf("--manager: %w", err)
	}
	tlsConfig, err := runners.ClientConfig(ca, host)
	if err != nil {
		return fmt.Errorf("--ca-file: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	bin, err := tfrunner.FindBinary(ctx, tfrunner.FindOptions{ExplicitPath: *terraformPath})
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("runner", *name, "pool", *pool)
	// The run-protocol token is this runner's identity: no run may read it.
	runsDir := filepath.Join(*workDir, "runs")
	env := runEnv(*workDir, splitList(*runEnvNames))
	if _, err := ensureCLIConfig(env, *workDir); err != nil {
		return err
	}
	if bin.Sandbox, err = newSandbox(*runSandbox, sandboxSetup{
		workDir: *workDir, binary: bin.Path, env: env,
		hide: []string{*tokenFile}, read: splitList(*sandboxRead), write: splitList(*sandboxWrite),
	}, func(f string, a ...any) { log.Info(fmt.Sprintf(f, a...)) }); err != nil {
		return err
	}
	if err := makeRunDirs(env); err != nil {
		return err
	}
	runs, err := tfrunner.NewPool(tfrunner.PoolOptions{
		Binary: bin, Dir: runsDir, Env: env, MaxConcurrent: *concurrency, GracePeriod: *grace,
	})
	if err != nil {
		return err
	}
	log.Info("runner starting", "manager", *manager, "binary", bin.String(), "concurrency", *concurrency)
	r := &runners.Runner{
		Name: *name, Pool: *pool, Manager: *manager, StateURL: *stateURL, TLS: tlsConfig, TokenFile: *tokenFile,
		Runs: runs, Concurrency: *concurrency, HeartbeatInterval: *heartbeat, Log: log, DrainTimeout: *drainTimeout,
	}
	err = r.Run(ctx)
	waitCtx, cancel := context.WithTimeout(context.Background(), *drainTimeout+*grace+10*time.Second)
	defer cancel()
	runs.Wait(waitCtx)
	return err
}
