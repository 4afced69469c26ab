{{/* Names, labels and shared pod settings of every template. */}}

{{- define "example-driver.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object name prefix: <release>-<chart>, or the release name when it contains the chart name. */}}
{{- define "example-driver.fullname" -}}
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

{{- define "example-driver.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{/* The DRA driver name, also the DeviceClass name. */}}
{{- define "example-driver.driverName" -}}
{{- default (printf "%s.example.com" .Values.deviceProfile) .Values.driverName }}
{{- end }}

{{- define "example-driver.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "example-driver.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one component; call with (dict "root" $ "component" "kubeletplugin"). */}}
{{- define "example-driver.selectorLabels" -}}
app.kubernetes.io/name: {{ include "example-driver.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "example-driver.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The backend class every component loads (its config model validates opaque config). */}}
{{- define "example-driver.backend" -}}
example_driver.driver:ExampleDriver
{{- end }}

{{/* The webhook's: the profile's admission model (example_driver.admission). */}}
{{- define "example-driver.admissionBackend" -}}
example_driver.admission:{{ title .Values.deviceProfile }}Admission
{{- end }}

{{/*
Environment pointing a component at apiServer.host/port instead of the in-cluster
service (explicit env wins over what the kubelet injects).
*/}}
{{- define "example-driver.apiServerEnv" -}}
{{- if or .Values.apiServer.host .Values.apiServer.port }}
{{- if not (and .Values.apiServer.host .Values.apiServer.port) }}
{{- fail "apiServer.host and apiServer.port must be set together" }}
{{- end }}
- name: KUBERNETES_SERVICE_HOST
  value: {{ .Values.apiServer.host | quote }}
- name: KUBERNETES_SERVICE_PORT
  value: {{ .Values.apiServer.port | toString | quote }}
{{- end }}
- name: LOG_FORMAT
  value: {{ .Values.logging.format | quote }}
- name: LOG_LEVEL
  value: {{ .Values.logging.level | quote }}
# The image is read-only; Python must not try to write bytecode.
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
{{- end }}

{{/*
Every pod runs on the host network: the node has no service proxy, and the
webhook must be reachable from an apiserver on the host.
*/}}
{{- define "example-driver.podNetwork" -}}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}

{{/* A container that needs nothing from the host but its network. */}}
{{- define "example-driver.restrictedSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Backend configuration of the plugin (and the webhook), from the values. */}}
{{- define "example-driver.backendConfig" -}}
profile: {{ .Values.deviceProfile }}
numDevices: {{ int .Values.kubeletPlugin.numDevices }}
gpuPartitions: {{ int .Values.kubeletPlugin.gpuPartitions }}
deviceStatus: {{ eq (toString .Values.gpuDeviceStatus) "true" }}
allowMultipleAllocations: {{ eq (toString .Values.gpuAllowMultipleAllocations) "true" }}
bindingConditions: {{ eq (toString .Values.kubeletPlugin.bindingConditions) "true" }}
numaNodes: {{ int .Values.kubeletPlugin.cpu.numaNodes }}
cpusPerNUMANode: {{ int .Values.kubeletPlugin.cpu.cpusPerNUMANode }}
{{- end }}
