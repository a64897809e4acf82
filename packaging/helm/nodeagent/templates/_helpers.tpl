{{/*
Names and labels of the chart's objects (Helm's conventions: name, fullname, labels,
selectorLabels).

One release per cluster: the CRDs, ClusterRoles, bindings and admission policies are
cluster-scoped, and two sets of controllers would fight over the same NodeMaintenances. So the
fullname is not prefixed with the release's name: by default every object keeps the name
packaging/kubernetes gives it (`nodeagent`, `nodeagent-controllers`, `nodeagent-config`, ...),
and tests/integration/packaging/test_helm_chart.py checks the default rendering is those objects.

fullnameOverride (or nameOverride) renames them all, consistently: the ServiceAccounts, and with
them the admission policies' CEL (the usernames system:serviceaccount:<namespace>:<fullname> and
<fullname>-controllers), the RBAC subjects, the ConfigMaps the pods mount, the ClusterRoles and
policies. Not renamed, and why:
- the eviction bridge's Service, Secret and ValidatingWebhookConfiguration
  (nodeagent-eviction-bridge, nodeagent-eviction-bridge-tls): the controllers' code names them
  (nodeagent/bridge/certstore.py), and the certificate is issued for that Service;
  its other objects keep the same prefix to stay together;
- the Lease: leaderElection.leaseName, a value of its own (Debian-package agents that run
  controllers must name the same one);
- the client-certificate user prefix system:nodeagent:<node> and group system:nodeagents
  (the .deb agents' certificates carry them).
*/}}

{{/* The app.kubernetes.io/name of the node agents' objects; the controllers' is <name>-controllers. */}}
{{- define "nodeagent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object name (40 characters at most: the longest suffix, -webhook-configuration-restriction, and a pod's generated suffix must fit). */}}
{{- define "nodeagent.fullname" -}}
{{- default (include "nodeagent.name" .) .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- end }}

{{/* The controllers' Deployment, ServiceAccount, PodDisruptionBudget and ClusterRole. */}}
{{- define "nodeagent.controllersFullname" -}}
{{- include "nodeagent.fullname" . }}-controllers
{{- end }}

{{- define "nodeagent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Helm's standard labels, on every object the chart makes (after its app.kubernetes.io/name).
Not on the pod templates (podLabels adds yours there): a chart version change alone would then
roll every node's agent, and a node whose agent is being replaced has no shutdown guard.
*/}}
{{- define "nodeagent.labels" -}}
helm.sh/chart: {{ include "nodeagent.chart" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
{{- end }}

{{/*
Selector labels: app.kubernetes.io/name alone, as the chart's first versions and
packaging/kubernetes select. Selectors are immutable: adding app.kubernetes.io/instance would
make `helm upgrade` from those fail, and with one release per cluster it tells nothing apart.
nameOverride changes them too: set it at install, never on an upgrade.
*/}}
{{- define "nodeagent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodeagent.name" . }}
{{- end }}

{{- define "nodeagent.controllersSelectorLabels" -}}
app.kubernetes.io/name: {{ include "nodeagent.name" . }}-controllers
{{- end }}

{{/* The image of both workloads. */}}
{{- define "nodeagent.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) }}
{{- end }}
