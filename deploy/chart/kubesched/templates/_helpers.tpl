{{/*
Helpers of the kubesched chart. Rendered by `cargo xtask deploy` (xtask/src/chart.rs): re-render rather than edit.
*/}}

{{/* The labels of every object, and the selector of the scheduler's pods. */}}
{{- define "kubesched.labels" -}}
app.kubernetes.io/name: kubesched
app.kubernetes.io/instance: {{ .Values.schedulerName | quote }}
{{- end }}

{{- define "kubesched.image" -}}
{{ .Values.image.repository }}{{ if .Values.image.digest }}@{{ .Values.image.digest }}{{ else }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ end }}
{{- end }}

{{- define "kubesched.leaseName" -}}
{{ .Values.leaderElection.resourceName | default .Values.schedulerName }}
{{- end }}

{{- define "kubesched.leaseNamespace" -}}
{{ .Values.leaderElection.resourceNamespace | default .Release.Namespace }}
{{- end }}

{{/* A Service name is a DNS label: no dots, at most 63 characters. */}}
{{- define "kubesched.metricsServiceName" -}}
{{ printf "%s-metrics" .Values.schedulerName | replace "." "-" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The KubeSchedulerConfiguration; the Deployment's pods carry its checksum. */}}
{{- define "kubesched.config" -}}
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: {{ .Values.leaderElect }}
  resourceName: {{ include "kubesched.leaseName" . | quote }}
  resourceNamespace: {{ include "kubesched.leaseNamespace" . | quote }}
profiles:
- schedulerName: {{ .Values.schedulerName | quote }}
  {{- with .Values.plugins }}
  plugins:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.pluginConfig }}
  pluginConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
