//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
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
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/queue"
	"github.com/conductor-tf/conductor-tf/test/harness"
)

const stateNamespace = "conductor-system"

// The shard durations of the suite, in the manager's proportions but shorter (15 s / 10 s / 2 s
// there): a replica cut off stops at 3 s and the others take its buckets at 6 s.
var shardOptions = shard.Options{LeaseDuration: 6 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}

// replica is one manager replica of the suite, as cmd/conductor-tf builds one with
// --shard-buckets: its resource reconciler, shard Coordinator and state server, all through its
// own faultTransport, runs carried by its own carrier; slot 0 also reconciles claims and classes
// (the leader's part) and is never stopped.
type replica struct {
	slot, gen int
	name      string
	faults    *faultTransport
	carrier   *carrier
	shard     *shard.Coordinator
	drain     *queue.Drain // the manager's SIGTERM drain: runs under way go on, on detached contexts
	cancel    context.CancelFunc
	done      chan struct{}
	err       error
}

// fleet is the suite's replicas: one per slot, each started again (a new generation, a new
// identity) when it ends, as a Deployment does a pod's container.
type fleet struct {
	t    *testing.T
	env  *harness.Env
	dir  string
	w    *world
	seed uint64

	mu       sync.Mutex
	current  map[int]*replica
	stopping bool
	joins    int // replicas joined (join), for their generations
	wg       sync.WaitGroup
}

// supervise keeps a replica in slot until the fleet stops.
func (f *fleet) supervise(slot int) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for gen := 0; ; gen++ {
			r := f.start(slot, gen)
			<-r.done
			f.w.note(fmt.Sprintf("%s ended: %v", r.name, r.err))
			f.mu.Lock()
			stop := f.stopping
			f.mu.Unlock()
			if stop {
				return
			}
			time.Sleep(time.Second)
		}
	}()
}

// join starts a replica in slot, once (not started again when it ends): with a fourth member the
// Coordinators move buckets to it at once, mid-create. A replica joined already is left.
func (f *fleet) join(slot int) {
	f.mu.Lock()
	_, in := f.current[slot]
	if !in && !f.stopping {
		f.joins++
	}
	gen := f.joins
	f.mu.Unlock()
	if in {
		return
	}
	f.wg.Add(1)
	r := f.start(slot, gen)
	go func() {
		defer f.wg.Done()
		<-r.done
		f.w.note(fmt.Sprintf("%s ended: %v", r.name, r.err))
	}()
}

// leave stops the replica joined in slot, if any, gracefully (its buckets move back, with what
// they hold), and waits for it.
func (f *fleet) leave(slot int) {
	f.mu.Lock()
	r := f.current[slot]
	delete(f.current, slot)
	f.mu.Unlock()
	if r == nil {
		return
	}
	r.drain.Begin(30 * time.Second)
	r.cancel()
	<-r.done
}

// replicaIn returns the replica in slot now.
func (f *fleet) replicaIn(slot int) *replica {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.current[slot]
}

// stop stops every replica gracefully and waits for them.
func (f *fleet) stop() {
	f.mu.Lock()
	f.stopping = true
	rs := make([]*replica, 0, len(f.current))
	for _, r := range f.current {
		rs = append(rs, r)
	}
	f.mu.Unlock()
	for _, r := range rs {
		r.faults.cut.Store(false)
		r.cancel()
	}
	f.wg.Wait()
}

func (f *fleet) start(slot, gen int) *replica {
	t := f.t
	r := &replica{slot: slot, gen: gen, name: fmt.Sprintf("r%d-g%d", slot, gen), done: make(chan struct{}),
		faults: newFaultTransport(f.seed + uint64(slot*1000+gen))}
	r.carrier = newCarrier(r.name, f.w, f.seed+uint64(slot*1000+gen))
	r.drain = queue.NewDrain()
	cfg := rest.CopyConfig(f.env.Config)
	cfg.WrapTransport = r.faults.wrap
	scheme := kruntime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	skip := true
	grace := 15 * time.Second
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip}, GracefulShutdownTimeout: &grace,
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// No client timeout (the manager's shard client has one): every call of the Coordinator has a
	// context deadline of its own, and a timeout would cut the Lease informer's watch through a
	// round tripper that cannot cancel it.
	shardKube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := mgr.GetEventRecorder("conductor-tf")
	server := statebackend.NewServer(kube, stateNamespace, statebackend.DefaultHistoryLimit)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	if err := server.Start(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	var res *resourcecontroller.Reconciler // made once its shard is: each names the other
	so := shardOptions
	so.Kube, so.Namespace, so.Pod, so.Identity = shardKube, stateNamespace, fmt.Sprint("slot-", slot), r.name
	so.OnAcquired = func(buckets []int) { res.BucketsTaken(buckets) }
	so.OnTake = func(int) { server.RelistPending() }
	so.OnLost = func(buckets []int, membership bool) {
		lost := map[int]bool{}
		for _, b := range buckets {
			lost[b] = true
		}
		n := r.carrier.kill(func(key string) bool { return membership || lost[r.shard.Bucket(resourcecontroller.ShardKey(key))] })
		if membership {
			r.drain.Interrupt() // as the manager's shardLost: the process ends
		}
		f.w.note(fmt.Sprintf("%s lost %d buckets (membership %v): %d runs killed", r.name, len(buckets), membership, n))
	}
	so.Settle = func(b int) bool {
		settled, _ := server.StorePendingWhere(func(l map[string]string) bool { return r.shard.Bucket(l[statebackend.LabelResource]) == b }, 2*time.Second)
		return settled
	}
	r.shard = shard.New(so)
	if err := mgr.Add(r.shard); err != nil {
		t.Fatal(err)
	}
	res, err = resourcecontroller.New(resourcecontroller.Options{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Kube: kube, Recorder: rec,
		Runs: r.carrier, StateServer: server, State: statebackend.Config{Namespace: stateNamespace},
		Identity:     resourcecontroller.RunIdentity{Who: "faults", Controller: r.name},
		SyncInterval: 10 * time.Hour, MaxConcurrentReconciles: 8, LeaderFence: shardOptions.Fence(), Drain: r.drain, Shard: r.shard})
	if err != nil {
		t.Fatal(err)
	}
	server.Serves = func(l map[string]string) bool { return r.shard.Serves(l[statebackend.LabelResource]) }
	if err := res.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if slot == 0 {
		if err := (&claimcontroller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, MaxConcurrentReconciles: 8}).SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
		bin, err := tfrunner.FindBinary(context.Background(), tfrunner.FindOptions{ExplicitPath: os.Getenv("CONDUCTOR_TF_TOFU")})
		if err != nil {
			t.Fatal(err)
		}
		tfEnv, err := harness.TerraformEnv(filepath.Join(f.dir, "home"))
		if err != nil {
			t.Fatal(err)
		}
		if err := (&classcontroller.Reconciler{Client: mgr.GetClient(), Recorder: rec, Secrets: mgr.GetAPIReader(), Namespace: stateNamespace,
			Modules: &tfrunner.ModuleCache{Binary: bin, Env: tfEnv, Dir: filepath.Join(f.dir, "modules")}}).SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	f.current[slot] = r
	f.mu.Unlock()
	f.w.note(r.name + " starts")
	go func() {
		r.err = mgr.Start(ctx)
		r.drain.Interrupt() // the manager's stop: what still runs is interrupted
		cancel()
		close(r.done)
	}()
	return r
}
