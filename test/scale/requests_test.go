//go:build scale

package scale_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiRequests reads the API server's apiserver_request_total counters (its /metrics, as cluster
// admin) and returns them summed by "VERB resource[/subresource]", over every client and code.
func apiRequests(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	mf := families["apiserver_request_total"]
	if mf == nil {
		return nil, fmt.Errorf("the API server reports no apiserver_request_total")
	}
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		key := labels["verb"] + " " + labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += m.GetCounter().GetValue()
	}
	return out, nil
}

// requestsPerRun is (after - before) / runs by key, largest first, as table rows "| key | n |",
// and the total per run. Keys that did not change are left out.
func requestsPerRun(before, after map[string]float64, runs int) (rows []string, total float64) {
	type kv struct {
		k string
		v float64
	}
	var diffs []kv
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			diffs = append(diffs, kv{k, d / float64(runs)})
			total += d / float64(runs)
		}
	}
	sort.Slice(diffs, func(i, j int) bool {
		if diffs[i].v != diffs[j].v {
			return diffs[i].v > diffs[j].v
		}
		return diffs[i].k < diffs[j].k
	})
	for _, d := range diffs {
		rows = append(rows, fmt.Sprintf("| %s | %.2f |", strings.TrimSpace(d.k), d.v))
	}
	return rows, total
}
