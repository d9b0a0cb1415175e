//go:build scale

package scale_test

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

var (
	poolClaims = flag.Int("pool-claims", 10, "claims of each class whose creation → Ready bench-pool measures")
	poolSize   = flag.Int("pool-size", 2, "the pooled class's spec.readyPool.size")
)

// TestBenchPool measures, in one run (make bench-pool; figures, not pass/fail), a claim's creation
// → Ready with a ready pool and without: two classes of the module "one", the same but for
// spec.readyPool, and -pool-claims claims of each created one at a time (each waits until the
// previous is Ready; with the pool, also until the pool is full again, so that every claim finds a
// ready member: the figure is the bind's, the refill's is reported apart). It fails only when a
// pooled claim is not bound to a pool member.
func TestBenchPool(t *testing.T) {
	b := startBench(t)
	defer b.stop()
	ctl, err := b.env.StartController(b.bin, filepath.Join(b.dir, "controller.log"), b.tfEnv, b.managerArgs()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Stop()
	requests := v1alpha1.Quantities{"storage": resource.MustParse("1Gi")}
	newClass := func(name, kind string, pool *v1alpha1.ReadyPool) *v1alpha1.InfraClass {
		c := &v1alpha1.InfraClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
				Module:    v1alpha1.ModuleSource{Source: b.module, Version: "v1"},
				Variables: v1alpha1.Variables{"prefix": {Raw: []byte(`"${resource.name}"`)}}, ReadyPool: pool},
		}
		if err := b.k8s.Create(b.ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	pooled := newClass("pets-pooled", "PooledPet", &v1alpha1.ReadyPool{Size: int32(*poolSize), Resources: v1alpha1.ClaimResources{Requests: requests}})
	newClass("pets", "Pet", nil)
	poolFull := func() bool {
		got := &v1alpha1.InfraClass{}
		return b.k8s.Get(b.ctx, client.ObjectKeyFromObject(pooled), got) == nil && got.Status.ReadyPool != nil &&
			got.Status.ReadyPool.Ready == int32(*poolSize)
	}
	start := time.Now()
	waitFor(t, 5*time.Minute, poolFull)
	fill := time.Since(start)

	var refills []time.Duration
	measure := func(kind string, pool bool) []time.Duration {
		var out []time.Duration
		for i := range *poolClaims {
			c := &v1alpha1.InfraClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("%s-%03d", strings.ToLower(kind), i)},
				Spec:       v1alpha1.InfraClaimSpec{ResourceKind: kind, Resources: v1alpha1.ClaimResources{Requests: requests}},
			}
			begin := time.Now()
			if err := b.k8s.Create(b.ctx, c); err != nil {
				t.Fatal(err)
			}
			got := &v1alpha1.InfraClaim{}
			waitFor(t, 2*time.Minute, func() bool {
				return b.k8s.Get(b.ctx, client.ObjectKeyFromObject(c), got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionReady)
			})
			out = append(out, time.Since(begin))
			if pool {
				if !strings.HasPrefix(got.Spec.ResourceName, "pets-pooled-pool-") {
					t.Fatalf("claim %s is bound to %s, not to a member of the pool", c.Name, got.Spec.ResourceName)
				}
				bound := time.Now()
				waitFor(t, 2*time.Minute, poolFull)
				refills = append(refills, time.Since(bound))
			}
		}
		return out
	}
	with := measure("PooledPet", true)
	without := measure("Pet", false)

	fmt.Printf("\nbench-pool: %d claims per class, one at a time, ready pool of %d, module with one random_pet, runs in %s, %d at once\n",
		*poolClaims, *poolSize, filepath.Base(b.tofu), *concurrency)
	fmt.Printf("| measure | p50 | p90 |\n|---|---|---|\n")
	fmt.Printf("| claim → Ready, ready pool | %d ms | %d ms |\n", percentile(with, 50).Milliseconds(), percentile(with, 90).Milliseconds())
	fmt.Printf("| claim → Ready, no pool | %d ms | %d ms |\n", percentile(without, 50).Milliseconds(), percentile(without, 90).Milliseconds())
	fmt.Printf("| ratio (pool / no pool) | %.3f× | %.3f× |\n",
		percentile(with, 50).Seconds()/percentile(without, 50).Seconds(), percentile(with, 90).Seconds()/percentile(without, 90).Seconds())
	fmt.Printf("| pool refilled after a bind | %d ms | %d ms |\n", percentile(refills, 50).Milliseconds(), percentile(refills, 90).Milliseconds())
	fmt.Printf("| pool of %d filled from empty | %.1f s | |\n", *poolSize, fill.Seconds())
}
