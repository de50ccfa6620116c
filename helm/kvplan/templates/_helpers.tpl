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
