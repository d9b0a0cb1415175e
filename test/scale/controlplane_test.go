//go:build scale

package scale_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	claimcontroller "github.com/conductor-tf/conductor-tf/internal/controller/claim"
	classcontroller "github.com/conductor-tf/conductor-tf/internal/controller/class"
	resourcecontroller "github.com/conductor-tf/conductor-tf/internal/controller/resource"
	"github.com/conductor-tf/conductor-tf/internal/shard"
	"github.com/conductor-tf/conductor-tf/internal/statebackend"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

var (
	replicas  = flag.Int("replicas", 1, "control-plane bench: manager replicas in this process; with more than one they shard the resources (internal/shard, 256 buckets) and the first also reconciles claims and classes")
	idleSync  = flag.Duration("idle-sync", 2*time.Minute, "control-plane bench: the sync interval, and the window over which one idle sync of every resource is measured after all are Ready")
	cpWorkers = flag.Int("cp-workers", 64, "control-plane bench: resource reconciles at once per replica")
)

// noTerraform is the run carrier of the control-plane bench: it answers every run at once, with a
// plan of one create applied and one output, and runs no Terraform. It speaks to the state server
// as a run's http backend does (LOCK, GET, POST, UNLOCK with the run's credentials), writing a
// one-resource state, and tells the events a real apply of one create tells. It stands for the
// runs so that what is measured is the control plane's share alone: reconciles, status and run
// records, the state server's Secrets and Leases, the API server. Applies and drift checks are
// counted: applies asked for, those that started (the controller let them past their slot) and
// those whose state I/O the state server refused (a share handed over, a membership lapsed).
type noTerraform struct {
	resourcecontroller.NoAdoption
	applies, started, refused, checks atomic.Int64
}

// benchState is the state an apply of noTerraform writes: one random_pet, as module "one" has.
const benchState = `{"version":4,"terraform_version":"1.12.6","serial":%d,"lineage":"bench-%s","outputs":{},` +
	`"resources":[{"module":"module.main","mode":"managed","type":"random_pet","name":"this","provider":"provider[\"registry.opentofu.org/hashicorp/random\"]",` +
	`"instances":[{"schema_version":0,"attributes":{"id":%q,"keepers":null,"length":2,"prefix":null,"separator":"-"}}]}],"check_results":null}`

func (c *noTerraform) Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error) {
	c.applies.Add(1)
	// The events a real apply of one create tells, in order (the controller checkpoints its
	// records on them): its slot, then the create's start.
	if err := opts.Events.Send(tfrunner.Started{}); err != nil {
		return nil, err
	}
	c.started.Add(1)
	if err := opts.Events.Send(tfrunner.CreateStarted{Address: "module.main.random_pet.this"}); err != nil {
		return nil, err
	}
	if err := writeStateAsRun(ctx, spec.Env, key); err != nil {
		c.refused.Add(1)
		return nil, err
	}
	return &tfrunner.ApplyResult{Initialized: true, Applied: true, Ended: []string{"module.main.random_pet.this"},
		Plan:    &tfjson.Plan{ID: "p-" + key, HasChanges: true, Summary: tfjson.Summary{Add: 1}},
		Outputs: map[string]tfjson.Output{"id": {Value: []byte(strconv.Quote(key))}}}, nil
}

// writeStateAsRun locks the run's state at the state server, reads it, writes the next serial and
// unlocks it, with the credentials in env (TF_HTTP_*: statebackend.RunCredentials.Env), as
// Terraform's http backend does during an apply.
func writeStateAsRun(ctx context.Context, env map[string]string, key string) error {
	call := func(method, url string, body []byte) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.SetBasicAuth(env["TF_HTTP_USERNAME"], env["TF_HTTP_PASSWORD"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		// A state not written yet is 404 (or 204), which Terraform's http backend reads as empty.
		empty := method == http.MethodGet && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusNoContent)
		if empty {
			return nil, nil
		}
		if resp.StatusCode >= 300 {
			return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, out)
		}
		return out, nil
	}
	if env["TF_HTTP_ADDRESS"] == "" {
		return fmt.Errorf("the run has no state server credentials")
	}
	lock, _ := json.Marshal(statebackend.Lock{ID: "bench-" + key + "-" + strconv.FormatInt(time.Now().UnixNano(), 36), Operation: "OperationTypeApply", Who: "bench@conductor-tf"})
	var id struct{ ID string }
	_ = json.Unmarshal(lock, &id)
	if _, err := call(statebackend.LockMethod, env["TF_HTTP_LOCK_ADDRESS"], lock); err != nil {
		return err
	}
	prev, err := call(http.MethodGet, env["TF_HTTP_ADDRESS"], nil)
	if err != nil {
		return err
	}
	var st struct{ Serial int64 }
	_ = json.Unmarshal(prev, &st)
	if _, err := call(http.MethodPost, env["TF_HTTP_ADDRESS"]+"?ID="+id.ID, []byte(fmt.Sprintf(benchState, st.Serial+1, key, key))); err != nil {
		return err
	}
	_, err = call(statebackend.UnlockMethod, env["TF_HTTP_UNLOCK_ADDRESS"], lock)
	return err
}

func (c *noTerraform) Destroy(context.Context, string, tfrunner.Spec) error { return nil }

func (c *noTerraform) DriftCheck(context.Context, string, tfrunner.Spec) (*tfjson.StreamResult, error) {
	c.checks.Add(1)
	return &tfjson.StreamResult{Plan: &tfjson.Plan{ID: "p-check"}}, nil
}

// cpReplica is one manager replica of the control-plane bench.
type cpReplica struct {
	cancel context.CancelFunc
	shard  *shard.Coordinator
}

// startCPReplica starts manager replica i: the resource reconciler with runs carried by runs (and
// sharding when there are several replicas), the claim and class reconcilers on replica 0 only
// (the class's module is read with tofu, as the manager does).
func startCPReplica(t *testing.T, env *harness.Env, i int, runs resourcecontroller.Runs, dir string) *cpReplica {
	scheme := kruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	// Several managers in one process register controllers of the same names.
	skip := true
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip},
		Client:     client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	rec := mgr.GetEventRecorder("conductor-tf")
	r := &cpReplica{}
	// The state server, as the manager runs it (runs of this replica's share only, when sharding).
	server := statebackend.NewServer(kube, stateNamespace, statebackend.DefaultHistoryLimit)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if err := server.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	opts := resourcecontroller.Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Kube: kube, Recorder: rec, Runs: runs, StateServer: server,
		State: statebackend.Config{Namespace: stateNamespace}, Identity: resourcecontroller.RunIdentity{Who: "bench", Controller: fmt.Sprint("replica-", i)},
		SyncInterval: *idleSync, MaxConcurrentReconciles: *cpWorkers}
	var res *resourcecontroller.Reconciler // made once its shard is: each names the other
	if *replicas > 1 {
		r.shard = shard.New(shard.Options{Kube: kube, Namespace: stateNamespace, Pod: fmt.Sprint("replica-", i), Identity: fmt.Sprint("replica-", i),
			OnAcquired: func(buckets []int) { res.BucketsTaken(buckets) }})
		if err := mgr.Add(r.shard); err != nil {
			t.Fatal(err)
		}
		opts.Shard = r.shard
		server.Serves = func(l map[string]string) bool { return r.shard.Serves(l[statebackend.LabelResource]) }
	}
	res, err = resourcecontroller.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if i == 0 {
		if err := (&claimcontroller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, MaxConcurrentReconciles: 16}).SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
		bin, err := tfrunner.FindBinary(context.Background(), tfrunner.FindOptions{ExplicitPath: os.Getenv("CONDUCTOR_TF_TOFU")})
		if err != nil {
			t.Fatal(err)
		}
		tfEnv, err := harness.TerraformEnv(filepath.Join(dir, "home"))
		if err != nil {
			t.Fatal(err)
		}
		if err := (&classcontroller.Reconciler{Client: mgr.GetClient(), Recorder: rec, Secrets: mgr.GetAPIReader(), Namespace: stateNamespace,
			Modules: &tfrunner.ModuleCache{Binary: bin, Env: tfEnv, Dir: filepath.Join(dir, "modules")}}).SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = mgr.Start(ctx) }()
	return r
}

// TestBenchControlPlane measures the control plane's share of N claims to Ready (make
// bench-controlplane): the real claim and resource reconcilers against a real API server, with
// runs carried by noTerraform (no Terraform runs: labelled as such in the output). It reports the
// time to Ready, API requests per claim, this process's RSS (the managers and the benchmark's one
// watch), the API server's and etcd's CPU per claim, and what one idle sync of every resource
// costs (requests and CPU over one -idle-sync window once all are Ready).
func TestBenchControlPlane(t *testing.T) {
	dir, env, k8s, w := startCPEnv(t, "bench")
	ctx := context.Background()
	runs := &noTerraform{}
	var rs []*cpReplica
	for i := range *replicas {
		rs = append(rs, startCPReplica(t, env, i, runs, dir))
	}
	defer func() {
		for _, r := range rs {
			r.cancel()
		}
	}()
	module, _ := filepath.Abs(filepath.Join("..", "..", "internal", "tfrunner", "testdata", "modules", "one"))
	class := &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: "pets"},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: "Pet", Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module:    v1alpha1.ModuleSource{Source: module, Version: "v1"},
			Variables: v1alpha1.Variables{"prefix": {Raw: []byte(`"${claim.name}"`)}}}}
	createClassReady(t, ctx, k8s, class)
	if *replicas > 1 {
		waitFor(t, time.Minute, func() bool {
			held := 0
			for _, r := range rs {
				held += len(r.shard.Held())
			}
			return held == shard.DefaultBuckets
		})
	}
	handovers0 := bucketHandovers(t, ctx, k8s)
	before, err := apiRequests(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	cpuBefore, selfBefore := cpuSeconds(), selfCPU()
	start := time.Now()
	createClaims(t, ctx, k8s, "bench", *n)
	created := time.Since(start)
	waitClaimsReady(t, ctx, w, "bench", *n, 3*time.Hour)
	elapsed := time.Since(start)
	fmt.Printf("all %d claims Ready after %.1f s\n", *n, elapsed.Seconds())
	cpuAfter, selfAfter := cpuSeconds(), selfCPU()
	after, err := apiRequests(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The benchmark's own requests: creating the claims, and waiting (LIST and WATCH of claims).
	before["POST infraclaims"] += float64(*n)
	delete(after, "LIST infraclaims")
	delete(after, "WATCH infraclaims")
	rows, total := requestsPerRun(before, after, *n)
	runtime.GC()
	rss, hwm := selfRSS()

	// One idle sync: every resource is planned again once per sync interval (a drift check,
	// DriftCheck here): from now until every resource was checked once more.
	checks0, idleBefore, idleCPU0, idleSelf0 := runs.checks.Load(), after, cpuSeconds(), selfCPU()
	idleStart := time.Now()
	waitFor(t, *idleSync+10*time.Minute, func() bool { return runs.checks.Load()-checks0 >= int64(*n) })
	idleWindow := time.Since(idleStart)
	idleAfter, err := apiRequests(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	idleCPU1, idleSelf1 := cpuSeconds(), selfCPU()
	checks := runs.checks.Load() - checks0
	idleRows, idleTotal := requestsPerRun(idleBefore, idleAfter, max(int(checks), 1))

	per := func(a, b map[string]float64, name string, count int) float64 {
		return (b[name] - a[name]) / float64(count) * 1000
	}
	fmt.Printf("\n## Control plane alone: %d claims, %d replica(s), runs carried by noTerraform (NO Terraform runs)\n\n", *n, *replicas)
	fmt.Printf("| | figure |\n|---|---|\n")
	fmt.Printf("| time to all Ready | %.1f s (claims created in %.1f s) |\n", elapsed.Seconds(), created.Seconds())
	fmt.Printf("| applies asked / started / state I/O refused | %d / %d / %d |\n", runs.applies.Load(), runs.started.Load(), runs.refused.Load())
	fmt.Printf("| API requests per claim (the managers') | %.1f |\n", total)
	fmt.Printf("| RSS of the process (managers + the bench's watch) | %d MiB (peak %d MiB) |\n", rss>>20, hwm>>20)
	fmt.Printf("| CPU per claim: managers | %.1f ms |\n", (selfAfter-selfBefore)/float64(*n)*1000)
	fmt.Printf("| CPU per claim: kube-apiserver | %.1f ms |\n", per(cpuBefore, cpuAfter, "kube-apiserver", *n))
	fmt.Printf("| CPU per claim: etcd | %.1f ms |\n", per(cpuBefore, cpuAfter, "etcd", *n))
	fmt.Printf("| one idle sync (interval %s): %d drift checks done | %.1f s after all were Ready |\n", *idleSync, checks, idleWindow.Seconds())
	fmt.Printf("| one idle sync: API requests per check | %.1f |\n", idleTotal)
	fmt.Printf("| one idle sync: CPU per check, managers / kube-apiserver / etcd | %.1f / %.1f / %.1f ms |\n",
		(idleSelf1-idleSelf0)/float64(max(checks, 1))*1000, per(idleCPU0, idleCPU1, "kube-apiserver", int(max(checks, 1))), per(idleCPU0, idleCPU1, "etcd", int(max(checks, 1))))
	fmt.Printf("\nAPI requests per claim, to Ready:\n\n| request | per claim |\n|---|---|\n%s\n", strings.Join(rows, "\n"))
	fmt.Printf("\nAPI requests per drift check, idle sync:\n\n| request | per check |\n|---|---|\n%s\n", strings.Join(idleRows, "\n"))
	if *replicas > 1 {
		for i, r := range rs {
			fmt.Printf("replica %d: %d buckets\n", i, len(r.shard.Held()))
		}
		fmt.Printf("bucket handovers while the claims were created, made Ready and synced: %d\n", bucketHandovers(t, ctx, k8s)-handovers0)
	}
}

// startCPEnv starts the API server of a control-plane bench (stopped when t ends) with the state
// namespace and namespaces, and returns a work directory, the server, a client and a watching one.
func startCPEnv(t *testing.T, namespaces ...string) (string, *harness.Env, client.Client, client.WithWatch) {
	ctrl.SetLogger(logr.Discard())
	dir := t.TempDir()
	env, err := harness.Start(dir, harness.CRDDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	k8s, err := env.Client()
	if err != nil {
		t.Fatal(err)
	}
	w, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range append([]string{stateNamespace}, namespaces...) {
		if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir, env, k8s, w
}

// createClassReady creates class and waits until the class controller has checked its module.
func createClassReady(t *testing.T, ctx context.Context, k8s client.Client, class *v1alpha1.InfraClass) {
	t.Helper()
	if err := k8s.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, func() bool {
		got := &v1alpha1.InfraClass{}
		return k8s.Get(ctx, client.ObjectKeyFromObject(class), got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady)
	})
}

// bucketHandovers sums the leaseTransitions of the shard's bucket Leases (internal/shard: one per
// handover of a bucket): 0 without sharding.
func bucketHandovers(t *testing.T, ctx context.Context, k8s client.Client) int {
	leases := &coordinationv1.LeaseList{}
	if err := k8s.List(ctx, leases, client.InNamespace(stateNamespace), client.MatchingLabels{shard.LabelShard: "bucket"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range leases.Items {
		if l.Spec.LeaseTransitions != nil {
			n += int(*l.Spec.LeaseTransitions)
		}
	}
	return n
}

// createClaims creates n claims of kind Pet in ns, 16 at a time.
func createClaims(t *testing.T, ctx context.Context, k8s client.Client, ns string, n int) {
	t.Helper()
	sem, errs := make(chan struct{}, 16), make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pet-%05d", i)}, Spec: v1alpha1.InfraClaimSpec{ResourceKind: "Pet"}}
			if err := k8s.Create(ctx, c); err != nil {
				errs <- err
			}
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// selfCPU is this process's CPU time (user + system), in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// selfRSS is this process's resident set size and its peak (VmRSS, VmHWM of /proc/self/status),
// in bytes.
func selfRSS() (rss, peak uint64) {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:") {
			v, _ := strconv.ParseUint(f[1], 10, 64)
			if f[0] == "VmRSS:" {
				rss = v << 10
			} else {
				peak = v << 10
			}
		}
	}
	return rss, peak
}
