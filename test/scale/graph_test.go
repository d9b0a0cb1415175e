//go:build scale

package scale_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner"
	"github.com/conductor-tf/conductor-tf/internal/tfrunner/tfjson"
)

var (
	chains = flag.Int("chains", 10, "graph bench: chains of claims")
	chainN = flag.Int("chain-length", 20, "graph bench: claims per chain")
)

// graphRuns is noTerraform whose apply outputs "id" = the run's prefix variable, and which records
// when each resource's apply of each value started and ended: the head of a chain outputs its
// parameter, and each claim after it renders its prefix from the one before (inputs.up), so a new
// value at the head runs down the chain, one apply per claim.
type graphRuns struct {
	noTerraform
	mu      sync.Mutex
	started map[string]time.Time // resource + "=" + value → first apply start
	ended   map[string]time.Time // resource + "=" + value → first apply end
	byValue map[string]int       // applies per value
}

func (c *graphRuns) Apply(ctx context.Context, key string, spec tfrunner.Spec, opts tfrunner.ApplyOptions) (*tfrunner.ApplyResult, error) {
	var prefix string
	_ = json.Unmarshal(spec.Variables["prefix"].(json.RawMessage), &prefix)
	c.mu.Lock()
	if _, ok := c.started[key+"="+prefix]; !ok {
		c.started[key+"="+prefix] = time.Now()
	}
	c.byValue[prefix]++
	c.mu.Unlock()
	out, err := c.noTerraform.Apply(ctx, key, spec, opts)
	if err != nil {
		return nil, err
	}
	out.Outputs = map[string]tfjson.Output{"id": {Value: []byte(fmt.Sprintf("%q", prefix))}}
	c.mu.Lock()
	if _, ok := c.ended[key+"="+prefix]; !ok {
		c.ended[key+"="+prefix] = time.Now()
	}
	c.mu.Unlock()
	return out, nil
}

// TestBenchGraph measures claims that read claims (make bench-graph): -chains chains of
// -chain-length claims, each reading the one before it, on the real claim and resource reconcilers
// and a real API server, runs carried by graphRuns (NO Terraform runs). Side by side in one run,
// the same number of claims that read nothing (the baseline): the API requests to Ready per claim
// of each, and the extra per edge. Then a new value at every chain's head: for each edge, the
// time from the upstream's apply ending to the dependent's apply of the new value starting (p50,
// p90, max). Then a sync of every head that changes nothing: the applies it starts downstream
// (want 0).
func TestBenchGraph(t *testing.T) {
	dir, env, k8s, w := startCPEnv(t, "graph", "flat")
	ctx := context.Background()
	runs := &graphRuns{started: map[string]time.Time{}, ended: map[string]time.Time{}, byValue: map[string]int{}}
	r := startCPReplica(t, env, 0, runs, dir)
	defer r.cancel()
	module, _ := filepath.Abs(filepath.Join("..", "..", "internal", "tfrunner", "testdata", "modules", "one"))
	for _, c := range []*v1alpha1.InfraClass{
		graphClass("head", "GraphHead", module, `"${claim.spec.parameters.v}"`),
		graphClass("link", "GraphLink", module, `"${inputs.up}"`),
	} {
		createClassReady(t, ctx, k8s, c)
	}
	total := *chains * *chainN
	edges := *chains * (*chainN - 1)

	// The baseline: as many claims, reading nothing.
	before, err := apiRequests(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range total {
		create(t, ctx, k8s, graphClaim("flat", fmt.Sprintf("flat-%04d", i), "GraphHead", "v1", ""))
	}
	waitClaimsReady(t, ctx, w, "flat", total, time.Hour)
	flatTime := time.Since(start)
	mid, err := apiRequests(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}

	// The graph, every claim created at once: each waits for the one it reads.
	start = time.Now()
	for i := range *chains {
		for j := range *chainN {
			up := ""
			if j > 0 {
				up = chainName(i, j-1)
			}
			kind := "GraphLink"
			if j == 0 {
				kind = "GraphHead"
			}
			create(t, ctx, k8s, graphClaim("graph", chainName(i, j), kind, fmt.Sprintf("chain%02d-v1", i), up))
		}
	}
	waitClaimsReady(t, ctx, w, "graph", total, time.Hour)
	graphTime := time.Since(start)
	after, err := apiRequests(ctx, env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string]float64{before, mid, after} {
		delete(m, "LIST infraclaims")
		delete(m, "WATCH infraclaims")
	}
	_, flatTotal := requestsPerRun(before, mid, total)
	graphRows, graphTotal := requestsPerRun(mid, after, total)

	// Propagation: a new value at every head.
	resources := map[string]string{} // claim → resource
	list := &v1alpha1.InfraClaimList{}
	if err := k8s.List(ctx, list, client.InNamespace("graph")); err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		resources[c.Name] = c.Status.ResourceName
	}
	for i := range *chains {
		patchParameter(t, ctx, k8s, "graph", chainName(i, 0), fmt.Sprintf("chain%02d-v2", i))
	}
	waitFor(t, time.Hour, func() bool {
		runs.mu.Lock()
		defer runs.mu.Unlock()
		for i := range *chains {
			if _, ok := runs.started[resources[chainName(i, *chainN-1)]+"="+fmt.Sprintf("chain%02d-v2", i)]; !ok {
				return false
			}
		}
		return true
	})
	var hops []time.Duration
	runs.mu.Lock()
	for i := range *chains {
		v := fmt.Sprintf("chain%02d-v2", i)
		for j := 1; j < *chainN; j++ {
			end := runs.ended[resources[chainName(i, j-1)]+"="+v]
			begin := runs.started[resources[chainName(i, j)]+"="+v]
			hops = append(hops, begin.Sub(end))
		}
	}
	runs.mu.Unlock()
	slices.Sort(hops)

	// A sync of every head that changes nothing: no downstream apply.
	applies0 := runs.applies.Load()
	checks0 := runs.checks.Load()
	stamp := time.Now().Format(time.RFC3339Nano)
	for i := range *chains {
		requestSync(t, ctx, k8s, resources[chainName(i, 0)], stamp)
	}
	waitFor(t, 10*time.Minute, func() bool { return runs.checks.Load()-checks0 >= int64(*chains) })
	time.Sleep(10 * time.Second) // what a no-op would start, it starts within this
	noopApplies := runs.applies.Load() - applies0

	pct := func(p float64) time.Duration { return hops[min(len(hops)-1, int(p*float64(len(hops))))] }
	fmt.Printf("\n## Claims that read claims: %d chains of %d (%d edges), runs carried by graphRuns (NO Terraform runs)\n\n", *chains, *chainN, edges)
	fmt.Printf("| | figure |\n|---|---|\n")
	fmt.Printf("| %d claims reading nothing (baseline): all Ready | %.1f s |\n", total, flatTime.Seconds())
	fmt.Printf("| %d claims in chains, created at once: all Ready | %.1f s (ratio %.2f; a chain is %d applies in a row) |\n", total, graphTime.Seconds(), graphTime.Seconds()/flatTime.Seconds(), *chainN)
	fmt.Printf("| API requests per claim to Ready: baseline / graph | %.1f / %.1f |\n", flatTotal, graphTotal)
	fmt.Printf("| extra API requests per edge | %.1f |\n", (graphTotal-flatTotal)*float64(total)/float64(edges))
	fmt.Printf("| propagation, upstream's apply ended → dependent's apply started: p50 / p90 / max | %s / %s / %s |\n",
		pct(0.5).Round(time.Millisecond), pct(0.9).Round(time.Millisecond), hops[len(hops)-1].Round(time.Millisecond))
	fmt.Printf("| a new head value reaching the end of a chain of %d | %s (median chain) |\n", *chainN, chainTime(runs, resources).Round(time.Millisecond))
	fmt.Printf("| a sync of every head changing nothing: drift checks / downstream applies started | %d / %d |\n", runs.checks.Load()-checks0, noopApplies)
	fmt.Printf("\nAPI requests per claim, graph, to Ready:\n\n| request | per claim |\n|---|---|\n%s\n", strings.Join(graphRows, "\n"))
	if noopApplies != 0 {
		t.Errorf("a sync that changed nothing started %d applies", noopApplies)
	}
}

// chainTime is the median over chains of the time from the head's v2 apply ending to the last
// claim's v2 apply starting.
func chainTime(runs *graphRuns, resources map[string]string) time.Duration {
	runs.mu.Lock()
	defer runs.mu.Unlock()
	var out []time.Duration
	for i := range *chains {
		v := fmt.Sprintf("chain%02d-v2", i)
		out = append(out, runs.started[resources[chainName(i, *chainN-1)]+"="+v].Sub(runs.ended[resources[chainName(i, 0)]+"="+v]))
	}
	slices.Sort(out)
	return out[len(out)/2]
}

func chainName(i, j int) string { return fmt.Sprintf("c%02d-%02d", i, j) }

func graphClass(name, kind, module, prefix string) *v1alpha1.InfraClass {
	return &v1alpha1.InfraClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.InfraClassSpec{ResourceKind: kind, Default: true, ReclaimPolicy: v1alpha1.ReclaimDelete,
			Module:    v1alpha1.ModuleSource{Source: module, Version: "v1"},
			Variables: v1alpha1.Variables{"prefix": {Raw: []byte(prefix)}}}}
}

// graphClaim is a claim of kind; a head has parameter v, a link reads up's output id as up.
func graphClaim(ns, name, kind, v, up string) *v1alpha1.InfraClaim {
	c := &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.InfraClaimSpec{ResourceKind: kind}}
	if up == "" {
		c.Spec.Parameters = v1alpha1.Variables{"v": {Raw: []byte(fmt.Sprintf("%q", v))}}
	} else {
		c.Spec.ParametersFrom = []v1alpha1.ParameterFrom{{Parameter: "up", Claim: up, Output: "id"}}
	}
	return c
}

func create(t *testing.T, ctx context.Context, k8s client.Client, obj client.Object) {
	t.Helper()
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

func patchParameter(t *testing.T, ctx context.Context, k8s client.Client, ns, name, v string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"parameters":{"v":%q}}}`, v))
	if err := k8s.Patch(ctx, &v1alpha1.InfraClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

func requestSync(t *testing.T, ctx context.Context, k8s client.Client, resource, stamp string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationReconcileRequestedAt, stamp))
	if err := k8s.Patch(ctx, &v1alpha1.InfraResource{ObjectMeta: metav1.ObjectMeta{Name: resource}}, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}
