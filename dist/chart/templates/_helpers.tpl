{{/* The chart's name: nameOverride, else the chart's. */}}
{{- define "conductor-tf.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every object's name: fullnameOverride, else the release's name (so a release named
conductor-tf names its objects as dist/install.yaml does). At most 28 characters: the longest suffix
the chart adds, -controller-manager-metrics-service, is 35 and a Service's name at most 63.
*/}}
{{- define "conductor-tf.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 28 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "conductor-tf.labels" -}}
app.kubernetes.io/name: {{ include "conductor-tf.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}
