{{/*
The operator's permissions, least privilege and without wildcards. Each rule
says why the operator needs it. Rules on namespaced resources are granted
cluster-wide (ClusterRole) or per watched namespace (Role); see rbac-*.yaml.
*/}}

{{/* Rules on namespaced resources in the namespaces the operator watches. */}}
{{- define "sluiceway.rbac.namespacedRules" -}}
# Watch and reconcile the Sluiceway resources; patch for finalizers and kopf's annotations.
- apiGroups: [sluiceway.dev]
  resources: [taskdefinitions, workflows, workflowruns, semaphores, quotas, schedules, webhooks, triggers]
  verbs: [get, list, watch, patch]
# Delete WorkflowRuns whose ttlSecondsAfterFinished has passed since their run ended.
- apiGroups: [sluiceway.dev]
  resources: [workflowruns]
  verbs: [delete]
# Report Ready conditions and counters: status is written only by the operator.
- apiGroups: [sluiceway.dev]
  resources: [taskdefinitions/status, workflows/status, workflowruns/status, semaphores/status, quotas/status,
              schedules/status, webhooks/status, triggers/status]
  verbs: [get, patch]
# Read, by name, the Secrets Webhooks verify with and GRPC and WEBHOOK tasks use
# (only those labelled sluiceway.dev/secret=true are ever used).
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
# Record Events on the objects it reconciles (kopf posts core and events.k8s.io Events).
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# Run the worker Deployment each TaskDefinition asks for, and remove it again.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch, delete]
# Those Deployments are owned by their TaskDefinition (blockOwnerDeletion), which the
# OwnerReferencesPermissionEnforcement admission plugin allows only with update on its finalizers.
- apiGroups: [sluiceway.dev]
  resources: [taskdefinitions/finalizers]
  verbs: [update]
# CONTAINER tasks: one pod per attempt, created, listed and watched while it runs (and to
# fence or adopt pods after a restart), read when the watch is down, deleted when its
# attempt ends; its log read into the task's.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create, delete]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
{{- if .Values.apiKeys.allowWrites }}
# apiKeys.allowWrites: an API-key caller writing definitions acts as the ServiceAccount its key names.
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [impersonate]
{{- end }}
{{- end }}

{{/* Rules on cluster-scoped resources and cluster-wide APIs: always in a ClusterRole. */}}
{{- define "sluiceway.rbac.clusterScopedRules" -}}
# kopf discovers the Sluiceway resources (and waits for them) through their CRDs.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
# kopf lists namespaces to follow the watched ones as they come and go.
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
# Authenticate API callers' bearer tokens.
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
# Authorize API callers: may this caller do this in that namespace?
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
{{- end }}

{{/* Rules in the release namespace only. */}}
{{- define "sluiceway.rbac.releaseNamespaceRules" -}}
# Leader election for the reconcilers: one replica reconciles, the others wait on the Lease.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
# API keys are Secrets in the release namespace labelled sluiceway.dev/api-key: "true".
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch]
{{- end }}

{{/* The subject every binding names: the operator's ServiceAccount. */}}
{{- define "sluiceway.rbac.subjects" -}}
- kind: ServiceAccount
  name: {{ include "sluiceway.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}
