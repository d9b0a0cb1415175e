package main

import (
	"os"
	"path/filepath"
)

// monitoringDir holds the dashboard and the alerts the chart ships (config/monitoring, relative to
// the repository's root, where make runs).
var monitoringDir = filepath.Join("config", "monitoring")

// monitoringFiles are the chart's files for dashboards and alerts: config/monitoring's
// dashboard.json and alerts.yaml under files/ (read with .Files.Get), the ConfigMap the Grafana
// sidecar loads, the PrometheusRule and the ServiceMonitor, each behind its value. An error when
// config/monitoring cannot be read.
func monitoringFiles() (map[string]string, error) {
	files := map[string]string{
		"templates/monitoring/dashboard.yaml":      dashboardTemplate,
		"templates/monitoring/prometheusrule.yaml": prometheusRuleTemplate,
		"templates/monitoring/servicemonitor.yaml": serviceMonitorTemplate,
	}
	for _, name := range []string{"dashboard.json", "alerts.yaml"} {
		b, err := os.ReadFile(filepath.Join(monitoringDir, name))
		if err != nil {
			return nil, err
		}
		files["files/"+name] = string(b)
	}
	return files, nil
}

// monitoringValues is the part of values.yaml for dashboards and alerts.
const monitoringValues = `
# Dashboards, alerts and scraping for the Prometheus Operator and Grafana (docs/monitoring.md).
monitoring:
  # A ConfigMap holding the Grafana dashboard, labelled for the Grafana sidecar to load it.
  dashboards:
    enable: false
    # Where the sidecar looks (empty: the release's namespace).
    namespace: ""
    labels:
      grafana_dashboard: "1"
    annotations: {}
  # A PrometheusRule (the Prometheus Operator's CRD) with the alerts of config/monitoring/alerts.yaml.
  prometheusRule:
    enable: false
    labels: {}
  # A ServiceMonitor scraping the metrics Service with Prometheus' ServiceAccount token (bind it to
  # the ClusterRole <release>-metrics-reader). Needs metrics.enable.
  serviceMonitor:
    enable: false
    labels: {}
    interval: 30s
    # The manager's certificate is self-signed unless one is mounted.
    insecureSkipVerify: true
`

const dashboardTemplate = `{{- if .Values.monitoring.dashboards.enable }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "conductor-tf.fullname" . }}-dashboard
  namespace: {{ .Values.monitoring.dashboards.namespace | default .Release.Namespace }}
  labels:
    {{- include "conductor-tf.labels" . | nindent 4 }}
    {{- with .Values.monitoring.dashboards.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.monitoring.dashboards.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
data:
  conductor-tf.json: |-
    {{- .Files.Get "files/dashboard.json" | nindent 4 }}
{{- end }}
`

const prometheusRuleTemplate = `{{- if .Values.monitoring.prometheusRule.enable }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "conductor-tf.fullname" . }}-alerts
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "conductor-tf.labels" . | nindent 4 }}
    {{- with .Values.monitoring.prometheusRule.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- .Files.Get "files/alerts.yaml" | fromYaml | toYaml | nindent 2 }}
{{- end }}
`

const serviceMonitorTemplate = `{{- if and .Values.monitoring.serviceMonitor.enable .Values.metrics.enable }}
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {{ include "conductor-tf.fullname" . }}-controller-manager
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "conductor-tf.labels" . | nindent 4 }}
    {{- with .Values.monitoring.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  endpoints:
  - port: https
    scheme: https
    path: /metrics
    interval: {{ .Values.monitoring.serviceMonitor.interval }}
    bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
    tlsConfig:
      insecureSkipVerify: {{ .Values.monitoring.serviceMonitor.insecureSkipVerify }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ include "conductor-tf.name" . }}
      app.kubernetes.io/instance: {{ .Release.Name }}
      control-plane: controller-manager
{{- end }}
`
