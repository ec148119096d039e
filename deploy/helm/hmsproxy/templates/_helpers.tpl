{{/* The chart's name, overridable. */}}
{{- define "hmsproxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's object names: release-chart unless the release already says hmsproxy. */}}
{{- define "hmsproxy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hmsproxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hmsproxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hmsproxy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "hmsproxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret holding admin-token and redis-password, or "" for none. */}}
{{- define "hmsproxy.secretName" -}}
{{- if .Values.secret.create }}
{{- include "hmsproxy.fullname" . }}
{{- else }}
{{- .Values.secret.existingSecret }}
{{- end }}
{{- end }}

{{/* The config file: the user's keys, with the listen addresses taken from ports. */}}
{{- define "hmsproxy.config" -}}
{{- $cfg := deepCopy (default dict .Values.config) }}
{{- $_ := set $cfg "listen" (printf ":%d" (int .Values.ports.thrift)) }}
{{- $admin := deepCopy (default dict (get $cfg "admin")) }}
{{- $_ := set $admin "listen" (printf ":%d" (int .Values.ports.admin)) }}
{{- $_ := set $cfg "admin" $admin }}
{{- toYaml $cfg }}
{{- end }}
