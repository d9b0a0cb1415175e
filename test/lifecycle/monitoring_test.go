package lifecycle_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/conductor-tf/conductor-tf/api/v1alpha1"
)

// grafanaVariables are the dashboard's variables, replaced by what Grafana would put there before
// its queries go to Prometheus.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*")

// dashboardQueries are the expressions of every panel of config/monitoring/dashboard.json (and
// of its variables' label_values queries, by metric name), by panel title.
func dashboardQueries() map[string][]string {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "monitoring", "dashboard.json"))
	Expect(err).NotTo(HaveOccurred())
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	Expect(json.Unmarshal(raw, &dash)).To(Succeed())
	out := map[string][]string{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		Expect(p.Targets).NotTo(BeEmpty(), "panel %q has no query", p.Title)
		for _, t := range p.Targets {
			out[p.Title] = append(out[p.Title], grafanaVariables.Replace(t.Expr))
		}
	}
	return out
}

// alertRules are config/monitoring/alerts.yaml's rules, as Prometheus loads a rule file.
type alertRules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// metricNames are the series an expression selects, parsed by Prometheus' own PromQL parser.
func metricNames(expr string) ([]string, error) {
	node, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

// exported says whether the scrape has the series name (a histogram's _bucket, _sum and _count
// belong to its family).
func exported(families map[string]bool, name string) bool {
	for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
		if strings.HasSuffix(name, suffix) && families[strings.TrimSuffix(name, suffix)] {
			return true
		}
	}
	return false
}

var _ = Describe("Dashboards and alerts", func() {
	It("query only series a live manager exports, in expressions Prometheus parses", func() {
		s := newScenario()
		// A runner pool, so that its series is there (no runner connects: the alert's case).
		pool := &v1alpha1.InfraRunnerPool{ObjectMeta: metav1.ObjectMeta{Name: "dash-" + s.ns},
			Spec: v1alpha1.InfraRunnerPoolSpec{Replicas: ptr.To[int32](1), Concurrency: 1}}
		Expect(k8s.Create(s.ctx, pool)).To(Succeed())
		DeferCleanup(func() { _ = k8s.Delete(s.ctx, pool) })
		Expect(k8s.Create(s.ctx, fileClass("dash-"+s.ns, s.kind, v1alpha1.ReclaimDelete))).To(Succeed())
		claim := fileClaim(s.ns, "dashboard", s.kind, s.dir, "dashboard")
		Expect(k8s.Create(s.ctx, claim)).To(Succeed())
		s.ready(claim)

		families := map[string]bool{}
		Eventually(func() []string {
			families = map[string]bool{}
			for name := range scrape() {
				families[name] = true
			}
			var missing []string
			for _, want := range []string{"conductor_tf_runner_pool_connected_runners", "conductor_tf_claims", "conductor_tf_resource_last_synced_timestamp_seconds"} {
				if !families[want] {
					missing = append(missing, want)
				}
			}
			return missing
		}, timeout, time.Second).Should(BeEmpty())

		queries := dashboardQueries()
		Expect(len(queries)).To(BeNumerically(">=", 15), "the dashboard's panels")
		for title, exprs := range queries {
			for _, expr := range exprs {
				names, err := metricNames(expr)
				Expect(err).NotTo(HaveOccurred(), "panel %q: %s", title, expr)
				Expect(names).NotTo(BeEmpty(), "panel %q queries no series: %s", title, expr)
				for _, n := range names {
					Expect(exported(families, n)).To(BeTrue(), "panel %q queries %s, which the manager does not export", title, n)
				}
			}
		}

		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "monitoring", "alerts.yaml"))
		Expect(err).NotTo(HaveOccurred())
		var rules alertRules
		Expect(yaml.UnmarshalStrict(raw, &rules)).To(Succeed())
		alerts := map[string]bool{}
		docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring.md"))
		Expect(err).NotTo(HaveOccurred())
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				alerts[r.Alert] = true
				names, err := metricNames(r.Expr)
				Expect(err).NotTo(HaveOccurred(), "alert %s: %s", r.Alert, r.Expr)
				for _, n := range names {
					Expect(exported(families, n)).To(BeTrue(), "alert %s queries %s, which the manager does not export", r.Alert, n)
				}
				_, err = model.ParseDuration(r.For)
				Expect(err).NotTo(HaveOccurred(), "alert %s: for %q", r.Alert, r.For)
				Expect(r.Labels).To(HaveKey("severity"), "alert %s", r.Alert)
				Expect(r.Annotations).To(HaveKey("runbook_url"), "alert %s", r.Alert)
				anchor := strings.ToLower(r.Alert)
				Expect(r.Annotations["runbook_url"]).To(HaveSuffix("docs/monitoring.md#"+anchor), "alert %s", r.Alert)
				Expect(string(docs)).To(ContainSubstring("### "+r.Alert+"\n"), "alert %s has a runbook in docs/monitoring.md", r.Alert)
			}
		}
		Expect(alerts).To(HaveLen(6))
	})
})
