{{/*
Names and labels shared by every template.
*/}}

{{- define "drakit.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object name prefix: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "drakit.fullname" -}}
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

{{- define "drakit.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "drakit.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component; call with (dict "root" $ "component" "node-plugin"). */}}
{{- define "drakit.selectorLabels" -}}
app.kubernetes.io/name: {{ include "drakit.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "drakit.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "drakit.nodePlugin.fullname" -}}
{{- printf "%s-node-plugin" (include "drakit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "drakit.controller.fullname" -}}
{{- printf "%s-controller" (include "drakit.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "drakit.nodePlugin.serviceAccountName" -}}
{{- default (include "drakit.nodePlugin.fullname" .) .Values.nodePlugin.serviceAccount.name }}
{{- end }}

{{- define "drakit.controller.serviceAccountName" -}}
{{- default (include "drakit.controller.fullname" .) .Values.controller.serviceAccount.name }}
{{- end }}

{{/* The hostdev backend reads the host's device nodes, so it runs privileged unless told otherwise. */}}
{{- define "drakit.nodePlugin.privileged" -}}
{{- if kindIs "bool" .Values.nodePlugin.privileged }}
{{- .Values.nodePlugin.privileged }}
{{- else }}
{{- eq .Values.nodePlugin.backend "hostdev" }}
{{- end }}
{{- end }}

{{/* Host folders the kubelet uses for plugin registration and plugin data. */}}
{{- define "drakit.registrarDir" -}}
{{- printf "%s/plugins_registry" (trimSuffix "/" .Values.kubeletDir) }}
{{- end }}

{{- define "drakit.pluginsDir" -}}
{{- printf "%s/plugins" (trimSuffix "/" .Values.kubeletDir) }}
{{- end }}
