{{/* Chart name, cut to the 63 characters a label value allows. */}}
{{- define "hcp-flow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-qualified name; the release name alone when it already contains the chart name. */}}
{{- define "hcp-flow.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hcp-flow.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hcp-flow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hcp-flow.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "hcp-flow.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hcp-flow
{{- end -}}

{{- define "hcp-flow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hcp-flow.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hcp-flow.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Where a remote management cluster's kubeconfig is mounted. */}}
{{- define "hcp-flow.kubeconfigDir" -}}
{{- printf "/etc/hcp-flow/kubeconfigs/%s" . -}}
{{- end -}}

{{/*
The exporter's configuration file: `config` as given, `listen` from the service
port, and one sources.kube entry per kube watcher (after any the user listed).
*/}}
{{- define "hcp-flow.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $_ := set $cfg "listen" (printf "0.0.0.0:%d" (int .Values.service.port)) -}}
{{- $sources := dict -}}
{{- if $cfg.sources -}}
{{- $sources = $cfg.sources -}}
{{- end -}}
{{- $kube := list -}}
{{- if $sources.kube -}}
{{- $kube = $sources.kube -}}
{{- end -}}
{{- with .Values.inCluster -}}
{{- if .enabled -}}
{{- $entry := dict "mgmt_cluster" .mgmtCluster "in_cluster" true "mode" .mode -}}
{{- if .environment -}}
{{- $_ := set $entry "environment" .environment -}}
{{- end -}}
{{- $kube = append $kube (merge $entry (deepCopy (default dict .extra))) -}}
{{- end -}}
{{- end -}}
{{- range .Values.managementClusters -}}
{{- $key := default "kubeconfig" .key -}}
{{- $entry := dict "mgmt_cluster" .name "kubeconfig" (printf "%s/%s" (include "hcp-flow.kubeconfigDir" .name) $key) "mode" (default "aro" .mode) -}}
{{- if .context -}}
{{- $_ := set $entry "context" .context -}}
{{- end -}}
{{- if .environment -}}
{{- $_ := set $entry "environment" .environment -}}
{{- end -}}
{{- $kube = append $kube (merge $entry (deepCopy (default dict .extra))) -}}
{{- end -}}
{{- if $kube -}}
{{- $_ := set $sources "kube" $kube -}}
{{- end -}}
{{- $_ := set $cfg "sources" $sources -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Rule groups of every files/alerts/*.yaml not in `exclude`, in file-name order. */}}
{{- define "hcp-flow.ruleGroups" -}}
{{- $groups := list -}}
{{- range $path, $_ := .root.Files.Glob "files/alerts/*.yaml" -}}
{{- if not (has (base $path) $.exclude) -}}
{{- $text := $.root.Files.Get $path | replace "https://github.com/hcp-flow/hcp-flow/blob/main/docs/runbooks.md" $.root.Values.runbookBaseUrl -}}
{{- $doc := $text | fromYaml -}}
{{- if hasKey $doc "Error" -}}
{{- fail (printf "%s: %s" $path $doc.Error) -}}
{{- end -}}
{{- $groups = concat $groups $doc.groups -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "groups" $groups) -}}
{{- end -}}

{{/* Container environment: shard from the pod ordinal, OTLP settings, extras. */}}
{{- define "hcp-flow.env" -}}
{{- $fullname := include "hcp-flow.fullname" . }}
{{- if .Values.sharding.enabled }}
- name: HCPFLOW_SHARD
  valueFrom:
    fieldRef:
      fieldPath: metadata.labels['apps.kubernetes.io/pod-index']
- name: HCPFLOW_TOTAL_SHARDS
  value: {{ .Values.sharding.shards | quote }}
{{- end }}
{{- with .Values.otel }}
{{- if .endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .endpoint | quote }}
{{- with .protocol }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ . | quote }}
{{- end }}
- name: OTEL_SERVICE_NAME
  value: {{ default $fullname .serviceName | quote }}
{{- with .resourceAttributes }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ . | quote }}
{{- end }}
{{- if .headersSecret.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ .headersSecret.name }}
      key: {{ .headersSecret.key }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The spec of the state store's PersistentVolumeClaim (docs/design/03-timeline-model.md §3.8). */}}
{{- define "hcp-flow.stateClaimSpec" -}}
{{- with .Values.stateStore.persistence -}}
accessModes:
  {{- toYaml .accessModes | nindent 2 }}
{{- with .storageClass }}
storageClassName: {{ . | quote }}
{{- end }}
resources:
  requests:
    storage: {{ .size | quote }}
{{- end -}}
{{- end -}}
