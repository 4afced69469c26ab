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

{{/* Privileged only when asked for: null (the default) and false both mean unprivileged. */}}
{{- define "drakit.nodePlugin.privileged" -}}
{{- eq .Values.nodePlugin.privileged true }}
{{- end }}

{{/* Host folders the kubelet uses for plugin registration and plugin data. */}}
{{- define "drakit.registrarDir" -}}
{{- printf "%s/plugins_registry" (trimSuffix "/" .Values.kubeletDir) }}
{{- end }}

{{- define "drakit.pluginsDir" -}}
{{- printf "%s/plugins" (trimSuffix "/" .Values.kubeletDir) }}
{{- end }}

{{/*
The node plugin's own folder in pluginsDir (its DRA socket, checkpoint and
lock): the only part of pluginsDir it mounts.
*/}}
{{- define "drakit.pluginDataDir" -}}
{{- printf "%s/%s" (include "drakit.pluginsDir" .) .Values.driverName }}
{{- end }}

{{/*
Environment that points a component at apiServer.host/port instead of the
in-cluster Service (explicit env wins over what the kubelet injects).
*/}}
{{- define "drakit.apiServerEnv" -}}
{{- if or .Values.apiServer.host .Values.apiServer.port }}
{{- if not (and .Values.apiServer.host .Values.apiServer.port) }}
{{- fail "apiServer.host and apiServer.port must be set together" }}
{{- end }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.apiServer.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.apiServer.port | toString | quote }}
{{- end }}
{{- end }}

{{/*
Pod-level network settings for a component: hostNetwork and the DNS policy
that keeps cluster DNS working on the host network.
*/}}
{{- define "drakit.hostNetwork" -}}
{{- if . }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- end }}

{{/*
The NoExecute budget the controller gets, as YAML ({perNode, clusterPercent,
forgetAfter}): controller.noExecuteBudget, except that 0.1's
nodePlugin.health.noExecuteBudget (deprecated in 0.2, removed in 0.3) still
counts for the keys it sets while controller.noExecuteBudget keeps the defaults
(1 per node, 10 percent), so that 0.1's values upgrade with their budget.
*/}}
{{- define "drakit.noExecuteBudget" -}}
{{- $budget := deepCopy .Values.controller.noExecuteBudget }}
{{- if eq (include "drakit.noExecuteBudget.legacy" .) "used" }}
{{- $old := .Values.nodePlugin.health.noExecuteBudget }}
{{- range $key := list "perNode" "clusterPercent" }}
{{- if hasKey $old $key }}
{{- $_ := set $budget $key (get $old $key) }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml $budget }}
{{- end }}

{{/*
"used" when nodePlugin.health.noExecuteBudget is set and the controller's
budget is at its defaults, "ignored" when both are set, "" when it is not set.
*/}}
{{- define "drakit.noExecuteBudget.legacy" -}}
{{- $old := .Values.nodePlugin.health.noExecuteBudget }}
{{- if $old }}
{{- $new := .Values.controller.noExecuteBudget }}
{{- if and (eq (toString $new.perNode) "1") (eq (toString $new.clusterPercent) "10") }}
{{- print "used" }}
{{- else }}
{{- print "ignored" }}
{{- end }}
{{- end }}
{{- end }}
