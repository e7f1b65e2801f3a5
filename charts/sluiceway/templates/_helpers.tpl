{{/* The chart name, or nameOverride. */}}
{{- define "sluiceway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's resources: fullnameOverride, or
<release>-<name>, or just the release name when it already contains the name.
Truncated to 63 characters (the DNS label limit).
*/}}
{{- define "sluiceway.fullname" -}}
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

{{/* Chart name and version, for the helm.sh/chart label. */}}
{{- define "sluiceway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every resource. */}}
{{- define "sluiceway.labels" -}}
helm.sh/chart: {{ include "sluiceway.chart" . }}
{{ include "sluiceway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sluiceway
{{- end }}

{{/* The labels selectors use: stable across upgrades. */}}
{{- define "sluiceway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluiceway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Selector labels of the operator pods (the component keeps the dev PostgreSQL pods out). */}}
{{- define "sluiceway.operatorSelectorLabels" -}}
{{ include "sluiceway.selectorLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "sluiceway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sluiceway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The operator image; also the default worker image. */}}
{{- define "sluiceway.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* Name of the development PostgreSQL's StatefulSet, Service and Secret. */}}
{{- define "sluiceway.devPostgres.fullname" -}}
{{- printf "%s-dev-postgres" (include "sluiceway.fullname" . | trunc 50 | trimSuffix "-") }}
{{- end }}

{{- define "sluiceway.devPostgres.selectorLabels" -}}
{{ include "sluiceway.selectorLabels" . }}
app.kubernetes.io/component: dev-postgres
{{- end }}

{{/*
The Secret (name and key) holding the operator's DSN. Fails the render, naming
database.existingSecret, when no database is configured.
*/}}
{{- define "sluiceway.databaseSecretName" -}}
{{- if and .Values.database.existingSecret .Values.devPostgres.enabled }}
{{- fail "database.existingSecret and devPostgres.enabled are mutually exclusive: set database.existingSecret for a real PostgreSQL, or devPostgres.enabled=true (NOT FOR PRODUCTION) without it" }}
{{- else if .Values.database.existingSecret }}
{{- .Values.database.existingSecret }}
{{- else if .Values.devPostgres.enabled }}
{{- include "sluiceway.devPostgres.fullname" . }}
{{- else }}
{{- fail "database.existingSecret is required: name a Secret in the release namespace holding the PostgreSQL DSN under key database.secretKey (default \"dsn\"), e.g. --set database.existingSecret=sluiceway-db; or set devPostgres.enabled=true for a throwaway development database (NOT FOR PRODUCTION)" }}
{{- end }}
{{- end }}

{{- define "sluiceway.databaseSecretKey" -}}
{{- if .Values.devPostgres.enabled }}dsn{{ else }}{{ .Values.database.secretKey }}{{ end }}
{{- end }}
