//go:build scale

// Package scale_test measures throughput in one run (make bench-scale; figures, not pass/fail):
// N dynamic claims of one class to Ready through the real controller (the cmd/conductor-tf binary,
// as a process of its own), against two baselines with the same binary, provider mirror, state
// storage (Secrets of the same API server) and concurrency:
//
//	naive: a loop running `tofu init && tofu apply -auto-approve` in N directories;
//	bare:  `tofu apply -auto-approve` in N directories already initialised (init not timed).
//
// It also reports the controller's RSS at the end, the latency from creating a claim to its
// being Bound to an existing (static) resource, p50 and p90, and the time to reclaim every
// resource when all N claims are deleted at once (failing when one is left or reports StateMissing).
package scale_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
)

var (
	n           = flag.Int("n", 200, "claims (and baseline directories)")
	concurrency = flag.Int("concurrency", 2, "runs at once, for the controller and the baselines")
	static      = flag.Int("static", 30, "static claims whose claim → Bound latency is measured")
	warm        = flag.Bool("warm", true, "run the manager with its default warm providers (random among them: the provider process kept between runs); false: --warm-providers=none")
	runnerCount = flag.Int("runners", 0, "runner processes of a runner pool that run the claims (concurrency split among them); 0: the manager's in-process pool")
)

const stateNamespace = "conductor-system"

func TestBenchScale(t *testing.T) {
	b := startBench(t)
	defer b.stop()
	dir, env, k8s, ctx, module, tofu, tfEnv, bin := b.dir, b.env, b.k8s, b.ctx, b.module, b.tofu, b.tfEnv, b.bin
	args := b.managerArgs()
	profArgs, profAddr := pprofArgs(t)
	args = append(args, profArgs...)
	if !*warm {
		args = append(args, "--warm-providers=none")
	}
	var protocol, state string
	if *runnerCount > 0 {
		var poolArgs []string
		poolArgs, protocol, state = runnerPoolArgs(t)
		args = append(args, poolArgs...)
	}
	ctl, err := env.StartController(bin, filepath.Join(dir, "controller.log"), tfEnv, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Stop()
	mode := fmt.Sprintf("the manager's in-process pool of %d", *concurrency)
	if *runnerCount > 0 {
		perRunner := max(*concurrency / *runnerCount, 1)
		defer startRunnerPool(t, ctx, env, k8s, bin, dir, tfEnv, protocol, state, *runnerCount, perRunner)()
		mode = fmt.Sprintf("a runner pool of %d runner processes × %d runs", *runnerCount, perRunner)
	}
	class := &v1alpha1.InfraClass{
		ObjectMeta: metav1.ObjectMeta{Name: "pets"},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: "Pet", Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module:    v1alpha1.ModuleSource{Source: module, Version: "v1"},
			Variables: v1alpha1.Variables{"prefix": {Raw: []byte(`"${claim.name}"`)}}},
	}
	if *runnerCount > 0 {
		class.Spec.RunnerPool = benchPool
	}
	if err := k8s.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, func() bool {
		got := &v1alpha1.InfraClass{}
		return k8s.Get(ctx, client.ObjectKeyFromObject(class), got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady)
	})
	before, err := apiRequests(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	stopProfile := profileManager(t, profAddr)
	cpuBefore := cpuSeconds()
	start := time.Now()
	petClaimsToReady(t, ctx, k8s, "bench", *n)
	controllerTime := time.Since(start)
	waits, runs := runTimes(t, ctx, k8s, "Pet")
	cpuController := cpuRows(cpuBefore, cpuSeconds(), *n)
	stopProfile()
	after, err := apiRequests(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The benchmark's own requests: creating the claims, and polling them (LIST every 50 ms).
	before["POST infraclaims"] += float64(*n)
	delete(after, "LIST infraclaims")
	requestRows, requestTotal := requestsPerRun(before, after, *n)

	// Static claims: each binds to an existing Available resource.
	latencies := staticBindLatencies(t, ctx, k8s, module, *static)
	rss, peak, _ := ctl.RSS()
	deletion := massDeletion(t, ctx, k8s, "bench", "Pet", *n)

	// The baselines, same binary, mirror, state storage and concurrency.
	naiveTime, cpuNaive := baseline(t, dir, "naive", tofu, tfEnv, module, env.Kubeconfig, true)
	bareTime, cpuBare := baseline(t, dir, "bare", tofu, tfEnv, module, env.Kubeconfig, false)

	p50, p90 := percentile(latencies, 50), percentile(latencies, 90)
	if *warm {
		mode += ", warm providers"
	}
	fmt.Printf("\nbench-scale: N=%d claims, concurrency %d, %s, module with one random_pet, runs in %s\n", *n, *concurrency, filepath.Base(tofu), mode)
	fmt.Printf("| measure | value |\n|---|---|\n")
	fmt.Printf("| controller: %d claims to Ready | %.1f s |\n", *n, controllerTime.Seconds())
	fmt.Printf("| naive loop: init && apply × %d | %.1f s |\n", *n, naiveTime.Seconds())
	fmt.Printf("| bare apply × %d (initialised) | %.1f s |\n", *n, bareTime.Seconds())
	fmt.Printf("| controller / naive | %.2f× (target ≤ 0.7×) |\n", controllerTime.Seconds()/naiveTime.Seconds())
	fmt.Printf("| controller / bare | %.2f× (target ≤ 1.0×) |\n", controllerTime.Seconds()/bareTime.Seconds())
	fmt.Printf("| controller RSS at the end (peak) | %.0f MiB (%.0f MiB) |\n", float64(rss)/(1<<20), float64(peak)/(1<<20))
	fmt.Printf("| static claim → Bound, p50 / p90 (%d claims) | %d ms / %d ms |\n", len(latencies), p50.Milliseconds(), p90.Milliseconds())
	fmt.Printf("| apply runs in status: wait in line p50 / p90 (%d) | %d ms / %d ms |\n", len(waits), percentile(waits, 50).Milliseconds(), percentile(waits, 90).Milliseconds())
	fmt.Printf("| apply runs in status: run p50 / p90 (%d) | %d ms / %d ms |\n", len(runs), percentile(runs, 50).Milliseconds(), percentile(runs, 90).Milliseconds())
	fmt.Printf("| API server requests per claim to Ready | %.1f |\n", requestTotal)
	fmt.Printf("| %d claims deleted at once → every resource gone (0 StateMissing asserted) | %.1f s |\n", *n, deletion.Seconds())
	fmt.Printf("\nCPU per claim (/proc), controller: %s\nCPU per claim, naive loop: %s\nCPU per claim, bare apply: %s\n", cpuController, cpuNaive, cpuBare)
	fmt.Printf("\nAPI server requests per claim to Ready, by verb and resource (apiserver_request_total; the\n"+
		"benchmark's own CREATE and LIST of claims left out):\n| request | per claim |\n|---|---|\n%s\n", strings.Join(requestRows, "\n"))
}

// petClaimsToReady creates count claims of kind Pet (pet-0000 …) in namespace ns, 8 at a time, and
// waits until every one is Ready (at most 10 s per claim) through a watch (waitClaimsReady).
func petClaimsToReady(t *testing.T, ctx context.Context, k8s client.WithWatch, ns string, count int) {
	t.Helper()
	parallel(count, 8, func(i int) error {
		return k8s.Create(ctx, &v1alpha1.InfraClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pet-%04d", i)},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: "Pet",
				Resources: v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}}},
		})
	})
	waitClaimsReady(t, ctx, k8s, ns, count, time.Duration(count)*10*time.Second)
}

// staticBindLatencies creates count static resources, waits until they are Available, then
// creates one claim at a time that only they can satisfy and measures creation → Bound.
func staticBindLatencies(t *testing.T, ctx context.Context, k8s client.Client, module string, count int) []time.Duration {
	parallel(count, 8, func(i int) error {
		return k8s.Create(ctx, &v1alpha1.InfraResource{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("static-%03d", i)},
			Spec: v1alpha1.InfraResourceSpec{ResourceKind: "StaticPet", Module: v1alpha1.ModuleSource{Source: module, Version: "v1"},
				Variables:     v1alpha1.Variables{"prefix": {Raw: []byte(fmt.Sprintf(`"static-%03d"`, i))}},
				Capacity:      v1alpha1.Quantities{"storage": resource.MustParse("1Gi")},
				ReclaimPolicy: v1alpha1.ReclaimDelete},
		})
	})
	waitFor(t, time.Duration(count)*10*time.Second, func() bool {
		var list v1alpha1.InfraResourceList
		if err := k8s.List(ctx, &list); err != nil {
			return false
		}
		available := 0
		for _, r := range list.Items {
			if r.Spec.ResourceKind == "StaticPet" && r.Status.Phase == v1alpha1.ResourceAvailable {
				available++
			}
		}
		return available == count
	})
	var out []time.Duration
	for i := range count {
		c := &v1alpha1.InfraClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("static-claim-%03d", i)},
			Spec: v1alpha1.InfraClaimSpec{ResourceKind: "StaticPet",
				Resources: v1alpha1.ClaimResources{Requests: v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}}},
		}
		start := time.Now()
		if err := k8s.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, func() bool {
			got := &v1alpha1.InfraClaim{}
			return k8s.Get(ctx, client.ObjectKeyFromObject(c), got) == nil && got.Status.Phase == v1alpha1.ClaimBound
		})
		out = append(out, time.Since(start))
	}
	return out
}

// baseline times N directories of the module with state in Secrets of the same API server
// (Terraform's kubernetes backend): init && apply each (naive), or apply each after an untimed init.
// baseline returns the time of the timed loop and the CPU it used per claim (cpuRows).
func baseline(t *testing.T, dir, name, tofu string, tfEnv map[string]string, module, kubeconfig string, timeInit bool) (time.Duration, string) {
	// A plain loop has no shared plugin cache: each init installs the provider from the same
	// mirror (with one, OpenTofu 1.12's concurrent inits made applies fail: see tfrunner/shared.go).
	var envList []string
	for k, v := range tfEnv {
		if k != "TF_PLUGIN_CACHE_DIR" {
			envList = append(envList, k+"="+v)
		}
	}
	run := func(d string, args ...string) error {
		cmd := exec.Command(tofu, args...)
		cmd.Dir, cmd.Env = d, envList
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %v: %w\n%s", d, args, err, out)
		}
		return nil
	}
	dirs := make([]string, *n)
	for i := range dirs {
		dirs[i] = filepath.Join(dir, name, fmt.Sprint(i))
		root, _ := json.Marshal(map[string]any{
			"terraform": map[string]any{"backend": map[string]any{"kubernetes": map[string]any{
				"secret_suffix": statebackend.SuffixFor(fmt.Sprintf("%s-%d", name, i)), "namespace": "baseline", "config_path": kubeconfig}}},
			"module": map[string]any{"main": map[string]any{"source": module, "prefix": fmt.Sprintf("%s-%d", name, i)}},
		})
		if err := os.MkdirAll(dirs[i], 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dirs[i], "main.tf.json"), root, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	initArgs := []string{"init", "-input=false", "-no-color"}
	applyArgs := []string{"apply", "-auto-approve", "-input=false", "-no-color"}
	if !timeInit {
		parallel(*n, *concurrency, func(i int) error { return run(dirs[i], initArgs...) })
	}
	cpuBefore := cpuSeconds()
	start := time.Now()
	parallel(*n, *concurrency, func(i int) error {
		if timeInit {
			if err := run(dirs[i], initArgs...); err != nil {
				return err
			}
		}
		return run(dirs[i], applyArgs...)
	})
	return time.Since(start), cpuRows(cpuBefore, cpuSeconds(), *n)
}

// parallel runs fn(0..count-1) with at most width at once; the first error panics the test.
func parallel(count, width int, fn func(int) error) {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range count {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		panic(first)
	}
}

func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not done after %s", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}
