{{/* The objects' name: the release name, or `<release>-watchtower` when the release name lacks the chart's. */}}
{{- define "watchtower.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* What the Deployment, Service, NetworkPolicy and PodDisruptionBudget select pods by. */}}
{{- define "watchtower.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels: the selector's, plus who manages it (Helm's own two, absent from Kustomize's). */}}
{{- define "watchtower.labels" -}}
{{ include "watchtower.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The configuration file: the chart's settings, then the user's `config` over them. */}}
{{- define "watchtower.config" -}}
{{- $base := dict
  "cluster" (dict "source" "kube")
  "server" (dict "host" "0.0.0.0" "port" 8080 "external_url" (required "externalURL is required: the address users open the status page at, which every alert links to (docs/install.md)" .Values.externalURL))
-}}
{{- if .Values.ha.enabled -}}
{{- $_ := set $base "leader_election" (dict "enabled" true "lease_name" (include "watchtower.fullname" .)) -}}
{{- else -}}
{{- $_ := set $base "store" (dict "path" "/var/lib/watchtower/watchtower.db") -}}
{{- end -}}
{{- toYaml (mustMergeOverwrite $base (deepCopy .Values.config)) -}}
{{- end -}}
