package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The chart as committed, and the image config/ is rendered with for it (make helm-chart).
const (
	chartDir   = "../../dist/chart"
	chartImage = "conductor-tf/controller:dev"
)

// rendered is `hack/kustomize.sh IMG`: what dist/install.yaml holds.
func rendered(t *testing.T) []object {
	t.Helper()
	out, err := exec.Command("../../hack/kustomize.sh", chartImage).Output()
	if err != nil {
		t.Fatalf("hack/kustomize.sh: %v", errText(err))
	}
	objs, err := decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// helm runs the pinned helm (hack/tools.sh helm; make test provides CONDUCTOR_TF_HELM).
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv("CONDUCTOR_TF_HELM")
	if bin == "" {
		t.Fatal("CONDUCTOR_TF_HELM is not set: run through make test, which builds helm (hack/tools.sh helm)")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.Output()
	return string(out), errText(err)
}

// template renders the chart as release conductor-tf in conductor-system with the values given
// (YAML) and returns its objects.
func template(t *testing.T, values string) []object {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, "template", "conductor-tf", chartDir, "--namespace", configNamespace, "--values", f)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	objs, err := decode(strings.NewReader(out))
	if err != nil {
		t.Fatalf("helm template's output: %v\n%s", err, out)
	}
	return objs
}

func TestChartIsCurrent(t *testing.T) {
	files, err := chart(rendered(t), "0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	var committed []string
	err = filepath.WalkDir(chartDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(chartDir, p)
		committed = append(committed, rel)
		got, _ := os.ReadFile(p)
		if want, ok := files[rel]; !ok {
			t.Errorf("dist/chart/%s is not generated from config/", rel)
		} else if string(got) != want {
			t.Errorf("dist/chart/%s differs from what config/ generates", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != len(files) {
		t.Errorf("dist/chart holds %d files, config/ generates %d", len(committed), len(files))
	}
	if t.Failed() {
		t.Log("run make helm-chart and commit dist/chart")
	}
}

func TestChartLints(t *testing.T) {
	if out, err := helm(t, "lint", "--strict", chartDir); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

// The defaults render every object of dist/install.yaml but the Namespace, equal but for the
// chart's labels.
func TestChartDefaultsRenderInstallYAML(t *testing.T) {
	want := map[string]object{}
	for _, o := range rendered(t) {
		if str(o, "kind") != "Namespace" {
			want[key(o)] = normalize(o)
		}
	}
	got := map[string]object{}
	for _, o := range template(t, "") {
		got[key(o)] = normalize(o)
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: in dist/install.yaml, not rendered by the chart", k)
			continue
		}
		if !reflect.DeepEqual(g, w) {
			gy, _ := yaml.Marshal(g)
			wy, _ := yaml.Marshal(w)
			t.Errorf("%s differs:\nchart:\n%s\ninstall.yaml:\n%s", k, gy, wy)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: rendered by the chart, not in dist/install.yaml", k)
		}
	}
}

func key(o object) string {
	return fmt.Sprintf("%s %s/%s", str(o, "kind"), str(o, "metadata", "namespace"), str(o, "metadata", "name"))
}

// normalize drops what differs by design: the labels app.kubernetes.io/* and helm.sh/chart on
// objects, the release's instance label on the manager's pods, and the CRDs' resource policy.
func normalize(o object) object {
	if ann, ok := get(o, "metadata", "annotations").(map[string]any); ok {
		delete(ann, "helm.sh/resource-policy")
	}
	for _, ls := range []any{get(o, "metadata", "labels"), get(o, "spec", "template", "metadata", "labels")} {
		if ls, ok := ls.(map[string]any); ok {
			for k := range ls {
				if strings.HasPrefix(k, "app.kubernetes.io/") && k != "app.kubernetes.io/name" || k == "helm.sh/chart" {
					delete(ls, k)
				}
			}
		}
	}
	if md, ok := o["metadata"].(map[string]any); ok {
		if ls, ok := md["labels"].(map[string]any); ok {
			delete(ls, "app.kubernetes.io/name")
			if len(ls) == 0 {
				delete(md, "labels")
			}
		}
	}
	return o
}

// Every value the chart documents reaches the objects.
func TestChartValues(t *testing.T) {
	objs := template(t, `
fullnameOverride: ctf
controllerManager:
  replicas: 3
  image: {repository: registry.example/conductor-tf, tag: v9.9.9, pullPolicy: Always}
  imagePullSecrets: [{name: pull}]
  extraArgs: [--sync-interval=30m]
  extraEnv: [{name: AWS_REGION, value: eu-west-1}]
  runEnv: [AWS_REGION, AWS_PROFILE]
  resources: {limits: {cpu: "4", memory: 8Gi}}
  podAnnotations: {prometheus.io/scrape: "false"}
  nodeSelector: {kubernetes.io/os: linux}
  tolerations: [{key: infra, operator: Exists, effect: NoSchedule}]
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [infra]}]}]}}}
crd: {enable: false}
metrics: {enable: false}
providerMirror:
  cliConfig: |
    provider_installation {
      filesystem_mirror { path = "/providers" }
    }
  volume: {persistentVolumeClaim: {claimName: providers}}
`)
	kinds := map[string]int{}
	var deploy, cm object
	for _, o := range objs {
		kinds[str(o, "kind")]++
		if !strings.HasPrefix(str(o, "metadata", "name"), "ctf-") && str(o, "kind") != "CustomResourceDefinition" {
			t.Errorf("%s: not named after fullnameOverride", key(o))
		}
		switch str(o, "kind") {
		case "Deployment":
			deploy = o
		case "ConfigMap":
			cm = o
		}
	}
	// The one Service left is the runner pools' (ctf-runs), which metrics.enable does not gate.
	if kinds["CustomResourceDefinition"] != 0 || kinds["Service"] != 1 {
		t.Errorf("crd.enable and metrics.enable false still render %v", kinds)
	}
	if cm == nil || !strings.Contains(str(cm, "data", "terraform.rc"), `filesystem_mirror { path = "/providers" }`) {
		t.Errorf("providerMirror.cliConfig: no ConfigMap holding it: %v", cm)
	}
	pod := get(deploy, "spec", "template", "spec").(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	expect := map[string]any{
		"replicas":         get(deploy, "spec", "replicas"),
		"image":            c["image"],
		"imagePullPolicy":  c["imagePullPolicy"],
		"imagePullSecrets": pod["imagePullSecrets"],
		"resources":        c["resources"],
		"nodeSelector":     pod["nodeSelector"],
		"serviceAccount":   pod["serviceAccountName"],
		"ports":            c["ports"],
	}
	want := map[string]any{
		"replicas":         float64(3),
		"image":            "registry.example/conductor-tf:v9.9.9",
		"imagePullPolicy":  "Always",
		"imagePullSecrets": []any{map[string]any{"name": "pull"}},
		// Helm merges maps: the default requests stay unless set to null.
		"resources": map[string]any{"limits": map[string]any{"cpu": "4", "memory": "8Gi"},
			"requests": map[string]any{"cpu": "250m", "memory": "256Mi"}},
		"nodeSelector":   map[string]any{"kubernetes.io/os": "linux"},
		"serviceAccount": "ctf-controller-manager",
		// No metrics port; the run protocol's and the runners' state server's stay.
		"ports": []any{
			map[string]any{"containerPort": float64(9443), "name": "run-protocol", "protocol": "TCP"},
			map[string]any{"containerPort": float64(9444), "name": "runner-state", "protocol": "TCP"},
		},
	}
	for k := range want {
		if !reflect.DeepEqual(expect[k], want[k]) {
			t.Errorf("%s: got %#v, want %#v", k, expect[k], want[k])
		}
	}
	for _, k := range []string{"tolerations", "affinity"} {
		if pod[k] == nil {
			t.Errorf("%s not rendered", k)
		}
	}
	if get(deploy, "spec", "template", "metadata", "annotations", "prometheus.io/scrape") != "false" ||
		get(deploy, "spec", "template", "metadata", "annotations", "checksum/cli-config") == nil {
		t.Errorf("pod annotations: %v", get(deploy, "spec", "template", "metadata", "annotations"))
	}
	args := fmt.Sprint(c["args"])
	// The runners reach the release's Service; runs get the names runEnv lists.
	for _, a := range []string{"--leader-elect", "--sync-interval=30m", "--work-dir=/work", "--runner-service=ctf-runs", "--run-env=AWS_REGION,AWS_PROFILE"} {
		if !strings.Contains(args, a) {
			t.Errorf("args %s lack %s", args, a)
		}
	}
	if strings.Contains(args, "--metrics-bind-address") {
		t.Errorf("metrics.enable false, yet args %s", args)
	}
	env, _ := yaml.Marshal(c["env"])
	for _, e := range []string{"AWS_REGION", "TF_CLI_CONFIG_FILE", "POD_NAMESPACE"} {
		if !strings.Contains(string(env), e) {
			t.Errorf("env lacks %s:\n%s", e, env)
		}
	}
	vols, _ := yaml.Marshal(pod["volumes"])
	mounts, _ := yaml.Marshal(c["volumeMounts"])
	for _, s := range []string{"claimName: providers", "name: ctf-cli-config"} {
		if !strings.Contains(string(vols), s) {
			t.Errorf("volumes lack %q:\n%s", s, vols)
		}
	}
	for _, s := range []string{"mountPath: /providers", "mountPath: /etc/conductor-tf", "mountPath: /work"} {
		if !strings.Contains(string(mounts), s) {
			t.Errorf("volumeMounts lack %q:\n%s", s, mounts)
		}
	}
}

// Replicas without leader election would reconcile, plan and apply twice: helm refuses them.
func TestChartRefusesReplicasWithoutLeaderElection(t *testing.T) {
	f := filepath.Join(t.TempDir(), "values.yaml")
	_ = os.WriteFile(f, []byte("controllerManager: {replicas: 2, leaderElection: {enabled: false}}\n"), 0o600)
	_, err := helm(t, "template", "conductor-tf", chartDir, "--values", f)
	if err == nil || !strings.Contains(err.Error(), "needs controllerManager.leaderElection.enabled") {
		t.Fatalf("helm template with 2 replicas and no leader election: %v", err)
	}
}

// errText adds a command's standard error to its error.
func errText(err error) error {
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return err
}

// The tests run in hack/helmchart; config/monitoring is two levels up.
func init() { monitoringDir = filepath.Join("..", "..", "config", "monitoring") }

// TestChartMonitoring: the dashboard, the alerts and the ServiceMonitor behind their values,
// holding config/monitoring's files as they are.
func TestChartMonitoring(t *testing.T) {
	objs := template(t, `
monitoring:
  dashboards: {enable: true, namespace: grafana}
  prometheusRule: {enable: true, labels: {release: kube-prometheus}}
  serviceMonitor: {enable: true}
`)
	byKind := map[string]object{}
	for _, o := range objs {
		if str(o, "kind") == "ConfigMap" && strings.HasSuffix(str(o, "metadata", "name"), "-dashboard") ||
			str(o, "kind") == "PrometheusRule" || str(o, "kind") == "ServiceMonitor" {
			byKind[str(o, "kind")] = o
		}
	}
	cm := byKind["ConfigMap"]
	if cm == nil || str(cm, "metadata", "namespace") != "grafana" || str(cm, "metadata", "labels", "grafana_dashboard") != "1" {
		t.Fatalf("monitoring.dashboards: no ConfigMap for the Grafana sidecar in namespace grafana: %v", cm)
	}
	want, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := str(cm, "data", "conductor-tf.json"); strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
		t.Errorf("the dashboard ConfigMap does not hold config/monitoring/dashboard.json")
	}
	rule := byKind["PrometheusRule"]
	if rule == nil || str(rule, "metadata", "labels", "release") != "kube-prometheus" {
		t.Fatalf("monitoring.prometheusRule: no PrometheusRule with its labels: %v", rule)
	}
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var alerts object
	if err := yaml.Unmarshal(raw, &alerts); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(get(rule, "spec", "groups"), alerts["groups"]) {
		t.Errorf("the PrometheusRule's groups differ from config/monitoring/alerts.yaml")
	}
	if byKind["ServiceMonitor"] == nil {
		t.Errorf("monitoring.serviceMonitor: no ServiceMonitor")
	}
}
