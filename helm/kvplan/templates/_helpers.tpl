{{/*
Chart name, overridable with nameOverride. Truncated to 63 characters because
Kubernetes name fields are limited to that (DNS-1123 label).
*/}}
{{- define "kvplan.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name: <release>-<chart>, or just <release> when the release
name already contains the chart name.
*/}}
{{- define "kvplan.fullname" -}}
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

{{- define "kvplan.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object. No component label here: each object adds its own, so
the Service selector can tell server pods from migration and test pods.
*/}}
{{- define "kvplan.labels" -}}
helm.sh/chart: {{ include "kvplan.chart" . }}
app.kubernetes.io/name: {{ include "kvplan.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kvplan
{{- end }}

{{/*
Selector for the API server pods. Immutable on a Deployment once created, so
it holds only labels that never change between releases.
*/}}
{{- define "kvplan.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kvplan.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{- define "kvplan.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kvplan.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kvplan.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
"true" when the chart points at a shared database (URL or existing Secret);
empty otherwise, which selects the per-pod SQLite "embedded" mode.
*/}}
{{- define "kvplan.externalDatabase" -}}
{{- if or .Values.database.url .Values.database.existingSecret }}true{{ end }}
{{- end }}

{{/* Secret that the chart itself renders (admin tokens, database URL). */}}
{{- define "kvplan.secretName" -}}
{{- include "kvplan.fullname" . }}
{{- end }}

{{/* True when the chart must render its own Secret. */}}
{{- define "kvplan.createSecret" -}}
{{- if or (and .Values.adminTokens.tokens (not .Values.adminTokens.existingSecret)) (and .Values.database.url (not .Values.database.existingSecret)) }}true{{ end }}
{{- end }}

{{/*
Reject ambiguous combinations up front rather than silently picking one.
*/}}
{{- define "kvplan.validate" -}}
{{- if and .Values.database.url .Values.database.existingSecret }}
{{- fail "set only one of database.url and database.existingSecret" }}
{{- end }}
{{- if and .Values.adminTokens.tokens .Values.adminTokens.existingSecret }}
{{- fail "set only one of adminTokens.tokens and adminTokens.existingSecret" }}
{{- end }}
{{- end }}

{{/*
Environment shared by the server and the migration containers.
Pass a dict: (dict "ctx" $ "databaseSecret" NAME). databaseSecret is the Secret
holding DATABASE_URL; the migration hook passes its own short-lived Secret
because the release's Secret does not exist yet at pre-install time.
*/}}
{{- define "kvplan.databaseEnv" -}}
{{- $ctx := .ctx }}
{{- if $ctx.Values.database.existingSecret -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ $ctx.Values.database.existingSecret }}
      key: {{ $ctx.Values.database.existingSecretKey }}
{{- else if $ctx.Values.database.url -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .databaseSecret }}
      key: database-url
{{- else -}}
# Embedded mode: a per-pod SQLite file on the /data emptyDir.
- name: DATABASE_URL
  value: "sqlite:////data/kvplan.db"
{{- end }}
- name: KVPLAN_LOG_LEVEL
  value: {{ $ctx.Values.config.logLevel | quote }}
{{- end }}

{{/*
Writable /tmp for every kvplan container: the root filesystem is read-only and
Python (tempfile, uvicorn) expects a writable temp dir.
*/}}
{{- define "kvplan.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}

{{/* kvplan's in-cluster base URL, as the autoscalers call it. */}}
{{- define "kvplan.serviceURL" -}}
{{- printf "http://%s.%s.svc:%v" (include "kvplan.fullname" .) .Release.Namespace .Values.service.port }}
{{- end }}

{{/* Namespace of the workload KEDA scales (its ScaledObject must live there). */}}
{{- define "kvplan.kedaNamespace" -}}
{{- default .Release.Namespace .Values.keda.namespace }}
{{- end }}

{{/*
The prometheus trigger's query: the workload's live sequences (vLLM's running
plus waiting requests, summed over its pods) over what one replica holds
(kvplan_deployment_max_num_seqs of the profile; max() over kvplan replicas,
which all export it). A Deployment's pods are named <name>-<hash>-<suffix>;
PromQL regexes are anchored, so another Deployment's pods do not match.
*/}}
{{- define "kvplan.kedaQuery" -}}
{{- if .Values.keda.prometheus.query }}
{{- .Values.keda.prometheus.query }}
{{- else }}
{{- $pods := printf "%s-[a-z0-9]+-[a-z0-9]+" (replace "." "\\\\." .Values.keda.scaleTargetRef.name) }}
{{- $selector := printf `{namespace="%s",pod=~"%s"}` (include "kvplan.kedaNamespace" .) $pods }}
{{- printf `(sum(vllm:num_requests_running%s) + sum(vllm:num_requests_waiting%s)) / max(kvplan_deployment_max_num_seqs{deployment="%s"})` $selector $selector .Values.keda.profile }}
{{- end }}
{{- end }}

{{- define "kvplan.validateKeda" -}}
{{- if not .Values.keda.profile }}
{{- fail "keda.enabled needs keda.profile: the kvplan deployment profile of the workload" }}
{{- end }}
{{- if not .Values.keda.scaleTargetRef.name }}
{{- fail "keda.enabled needs keda.scaleTargetRef.name: the vLLM Deployment to scale" }}
{{- end }}
{{- if not (or .Values.keda.metricsApi.enabled .Values.keda.prometheus.enabled) }}
{{- fail "keda.enabled needs a trigger: keda.metricsApi.enabled or keda.prometheus.enabled" }}
{{- end }}
{{- if and .Values.keda.prometheus.enabled (not .Values.keda.prometheus.serverAddress) }}
{{- fail "keda.prometheus.enabled needs keda.prometheus.serverAddress" }}
{{- end }}
{{- if and .Values.keda.authentication.enabled (not .Values.keda.authentication.secretName) }}
{{- fail "keda.authentication.enabled needs keda.authentication.secretName" }}
{{- end }}
{{- end }}
