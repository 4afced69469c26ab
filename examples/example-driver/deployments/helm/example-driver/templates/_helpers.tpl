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
The plugin and the controller run on the host network: they serve nothing over
TCP, and a node without a service proxy reaches the apiserver only there. (The
webhook's network is webhook.endpoint's.)
*/}}
{{- define "example-driver.podNetwork" -}}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}

{{/*
Status writes need granular ResourceClaim status authorization (Kubernetes 1.36+,
KEP-4817): before it, resourceclaims/status is the whole status of every claim in
the cluster. Call with (dict "root" $ "value" "gpuDeviceStatus=true").
*/}}
{{- define "example-driver.requireGranularStatus" -}}
{{- if semverCompare "<1.36.0-0" .root.Capabilities.KubeVersion.Version }}
{{- fail (printf "%s needs Kubernetes 1.36 or newer (granular ResourceClaim status authorization, KEP-4817, feature gate DRAResourceClaimGranularStatusAuthorization); on %s resourceclaims/status would let its service account rewrite the allocation and reservedFor of any claim in the cluster" .value .root.Capabilities.KubeVersion.Version) }}
{{- end }}
{{- end }}

{{- define "example-driver.kubeletplugin.serviceAccountName" -}}
{{- printf "%s-kubeletplugin" (include "example-driver.fullname" .) }}
{{- end }}

{{- define "example-driver.webhook.name" -}}
{{- printf "%s-webhook" (include "example-driver.fullname" .) }}
{{- end }}

{{/* The Secret the webhook replicas keep their shared CA and serving certificate in. */}}
{{- define "example-driver.webhook.caSecret" -}}
{{- printf "%s-webhook-ca" (include "example-driver.fullname" .) }}
{{- end }}

{{/*
The claim spec of the admission request's object in CEL: spec for claims,
spec.spec for templates. Call with "object" or "oldObject".
*/}}
{{- define "example-driver.webhook.configsCEL" -}}
{{- printf "(request.resource.resource == 'resourceclaims' ? %s.?spec : %s.?spec.?spec).?devices.?config.orValue([])" . . }}
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
