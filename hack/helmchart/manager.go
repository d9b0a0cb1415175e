package main

import (
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Arguments the chart sets from values rather than from controllerManager.args.
const (
	argLeaderElect = "--leader-elect"
	argMetrics     = "--metrics-bind-address="
	// argRunnerService names the release's Service of the run protocol (<fullname>-runs), which
	// runners are sent to and the manager's certificate is signed for: any release name works.
	argRunnerService = "--runner-service="
)

// manager is the manager Deployment of config/, and the defaults it gives the chart's values.
type manager struct {
	deploy    object
	container map[string]any
	repo, tag string
	args      []string // the container's arguments but --leader-elect and --metrics-bind-address
	leader    bool
	metrics   string // the metrics port, "" when config/ serves no metrics
}

func newManager(deploy object) (*manager, error) {
	containers, _ := get(deploy, "spec", "template", "spec", "containers").([]any)
	if len(containers) != 1 {
		return nil, errors.New("the Deployment must have exactly one container, the manager")
	}
	m := &manager{deploy: deploy, container: containers[0].(map[string]any)}
	image := str(m.container, "image")
	m.repo, m.tag = image, "latest"
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		m.repo, m.tag = image[:i], image[i+1:]
	}
	args, _ := m.container["args"].([]any)
	for _, a := range args {
		s := fmt.Sprint(a)
		switch {
		case s == argLeaderElect:
			m.leader = true
		case strings.HasPrefix(s, argRunnerService):
			// templated from the release's name
		case strings.HasPrefix(s, argMetrics):
			m.metrics = s[strings.LastIndex(s, ":")+1:]
		default:
			m.args = append(m.args, s)
		}
	}
	if m.metrics == "" {
		return nil, errors.New("the manager serves no metrics (--metrics-bind-address=:PORT): the chart's metrics values need it")
	}
	return m, nil
}

// template is templates/manager/manager.yaml.
func (m *manager) template() string {
	t := newTemplater()
	d := deepCopy(m.deploy)
	t.meta(d)
	spec := d["spec"].(map[string]any)
	spec["replicas"] = t.expr("{{ .Values.controllerManager.replicas }}")
	tmpl := spec["template"].(map[string]any)
	tmd := tmpl["metadata"].(map[string]any)
	tmd["labels"].(map[string]any)["app.kubernetes.io/instance"] = t.expr("{{ .Release.Name }}")
	ann, _ := tmd["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	ann[t.block(`{{- if .Values.providerMirror.cliConfig }}
checksum/cli-config: {{ .Values.providerMirror.cliConfig | sha256sum }}
{{- end }}
{{- with .Values.controllerManager.podAnnotations }}
{{- toYaml . | nindent IND }}
{{- end }}`)] = ""
	tmd["annotations"] = ann

	pod := tmpl["spec"].(map[string]any)
	pod["serviceAccountName"] = t.name(str(pod, "serviceAccountName"))
	for _, k := range []string{"imagePullSecrets", "nodeSelector", "tolerations", "affinity"} {
		pod[t.block(withBlock(k))] = ""
	}

	containerTemplate(t, pod["containers"].([]any)[0].(map[string]any))
	volumes, _ := pod["volumes"].([]any)
	pod["volumes"] = append(volumes, t.block(`{{- if .Values.providerMirror.cliConfig }}
- name: cli-config
  configMap:
    name: `+fullname+`-cli-config
{{- end }}
{{- with .Values.providerMirror.volume }}
- name: provider-mirror
  {{- toYaml . | nindent IND2 }}
{{- end }}`))
	return `{{- if and (gt (int .Values.controllerManager.replicas) 1) (not .Values.controllerManager.leaderElection.enabled) }}
{{- fail "controllerManager.replicas > 1 needs controllerManager.leaderElection.enabled: replicas without an elected leader would run the same plans and applies twice" }}
{{- end }}
` + t.render(d)
}

// containerTemplate templates the manager's container c in place: the image, the args (metrics,
// leader election, the runner Service, the values' args, runEnv and extraArgs), the ports, the
// env and mounts of the provider mirror's CLI configuration, and the resources.
func containerTemplate(t *templater, c map[string]any) {
	c["image"] = t.expr("{{ .Values.controllerManager.image.repository }}:{{ .Values.controllerManager.image.tag | default .Chart.AppVersion }}")
	c["imagePullPolicy"] = t.expr("{{ .Values.controllerManager.image.pullPolicy }}")
	c["args"] = []any{t.block(`{{- if .Values.metrics.enable }}
- ` + argMetrics + `:{{ .Values.metrics.port }}
{{- end }}
{{- if .Values.controllerManager.leaderElection.enabled }}
- ` + argLeaderElect + `
{{- end }}
- ` + argRunnerService + `{{ include "conductor-tf.fullname" . }}-runs
{{- range .Values.controllerManager.args }}
- {{ . | quote }}
{{- end }}
{{- with .Values.controllerManager.runEnv }}
- --run-env={{ join "," . }}
{{- end }}
{{- range .Values.controllerManager.extraArgs }}
- {{ . | quote }}
{{- end }}`)}
	var ports []any // the run protocol's and the runners' state server's; metrics is a value
	all, _ := c["ports"].([]any)
	for _, p := range all {
		if p, ok := p.(map[string]any); !ok || p["name"] != "https-metrics" {
			ports = append(ports, p)
		}
	}
	c["ports"] = append(ports, t.block(`{{- if .Values.metrics.enable }}
- name: https-metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end }}`))
	env, _ := c["env"].([]any)
	c["env"] = append(env, t.block(`{{- if .Values.providerMirror.cliConfig }}
- name: TF_CLI_CONFIG_FILE
  value: /etc/conductor-tf/terraform.rc
{{- end }}
{{- with .Values.controllerManager.extraEnv }}
{{- toYaml . | nindent IND }}
{{- end }}`))
	delete(c, "resources")
	c[t.block(withBlock("resources"))] = ""
	mounts, _ := c["volumeMounts"].([]any)
	c["volumeMounts"] = append(mounts, t.block(`{{- if .Values.providerMirror.cliConfig }}
- name: cli-config
  mountPath: /etc/conductor-tf
  readOnly: true
{{- end }}
{{- if .Values.providerMirror.volume }}
- name: provider-mirror
  mountPath: {{ .Values.providerMirror.mountPath }}
  readOnly: true
{{- end }}`))
}

// deepCopy copies o through YAML, so that templating it leaves the defaults values() reads.
func deepCopy(o object) object {
	raw, err := yaml.Marshal(o)
	if err != nil {
		panic(err)
	}
	var c object
	if err := yaml.Unmarshal(raw, &c); err != nil {
		panic(err)
	}
	return c
}

// withBlock renders the pod or container field key from controllerManager.<key> when it is set.
func withBlock(key string) string {
	return "{{- with .Values.controllerManager." + key + " }}\n" + key + ":\n  {{- toYaml . | nindent IND2 }}\n{{- end }}"
}

// values is values.yaml, its defaults taken from config/'s Deployment.
func (m *manager) values() string {
	replicas := fmt.Sprint(get(m.deploy, "spec", "replicas"))
	pull := str(m.container, "imagePullPolicy")
	if pull == "" {
		pull = "IfNotPresent"
	}
	return fmt.Sprintf(valuesTemplate, replicas, m.repo, m.tag, pull, m.leader,
		indented(m.args, 2), indented(m.container["resources"], 4), m.metrics)
}

// indented marshals v as YAML with every line indented by n spaces.
func indented(v any, n int) string {
	raw, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	for i := range lines {
		lines[i] = strings.Repeat(" ", n) + lines[i]
	}
	return strings.Join(lines, "\n")
}
