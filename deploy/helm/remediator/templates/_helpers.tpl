{{/*
Names are fixed, as in deploy/: the WorkflowTemplates run as argo/remediator-workflow, the
sensors and Alertmanager post to remediator.<namespace>.svc, the service watches
kube-system/gpu-warmup. One release per cluster.
*/}}

{{/* Helm's standard labels plus part-of, on every object (selectors never carry them). */}}
{{- define "remediator.commonLabels" -}}
app.kubernetes.io/part-of: remediator
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "remediator.labels" -}}
app.kubernetes.io/name: remediator
{{ include "remediator.commonLabels" . }}
{{- end }}

{{- define "remediator.workflowLabels" -}}
app.kubernetes.io/name: remediator-workflow
{{ include "remediator.commonLabels" . }}
{{- end }}

{{- define "remediator.selectorLabels" -}}
app.kubernetes.io/name: remediator
app.kubernetes.io/component: service
{{- end }}

{{- define "remediator.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end }}

{{/* The ServiceAccount the service runs as, as a RoleBinding subject. */}}
{{- define "remediator.serviceSubject" -}}
- kind: ServiceAccount
  name: remediator
  namespace: {{ .Release.Namespace | quote }}
{{- end }}

{{- define "remediator.workflowSubject" -}}
- kind: ServiceAccount
  name: remediator-workflow
  namespace: {{ .Values.argo.namespace | quote }}
{{- end }}

{{/*
The policy the service loads, as YAML text: the inline map or the shipped deploy/base/policy.yaml,
with stuck_pod.namespaces following inferenceNamespaces (an inline policy naming others is
refused), gpu_memory.cordon off without cordonNodes (the grant it needs; an inline policy asking
for it without the grant is refused) and dry run forced on when dryRun.
*/}}
{{- define "remediator.policy" -}}
{{- $policy := deepCopy .Values.policy.inline -}}
{{- $shipped := not $policy -}}
{{- if $shipped -}}
{{- $policy = .Files.Get "files/policy.yaml" | fromYaml -}}
{{- end -}}
{{- $stuck := get $policy "stuck_pod" | default dict -}}
{{- $named := get $stuck "namespaces" -}}
{{- if and (not $shipped) $named (ne (toJson (sortAlpha $named)) (toJson (sortAlpha .Values.inferenceNamespaces))) -}}
{{- fail (printf "policy: stuck_pod.namespaces %v differs from inferenceNamespaces %v; leave it out and the chart sets it" $named .Values.inferenceNamespaces) -}}
{{- end -}}
{{- $_ := set $stuck "namespaces" .Values.inferenceNamespaces -}}
{{- $_ = set $policy "stuck_pod" $stuck -}}
{{- $gpu := get $policy "gpu_memory" | default dict -}}
{{- if not .Values.cordonNodes -}}
{{- if and (not $shipped) (eq (toString (get $gpu "cordon")) "true") -}}
{{- fail "policy: gpu_memory.cordon is true but cordonNodes is false; cordoning needs cordonNodes: true (its RBAC)" -}}
{{- end -}}
{{- $_ = set $gpu "cordon" false -}}
{{- $_ = set $policy "gpu_memory" $gpu -}}
{{- end -}}
{{- if .Values.dryRun -}}
{{- $guardrails := get $policy "guardrails" | default dict -}}
{{- $dryRun := get $guardrails "dry_run" | default dict -}}
{{- $_ = set $dryRun "enabled" true -}}
{{- $_ = set $guardrails "dry_run" $dryRun -}}
{{- $_ = set $policy "guardrails" $guardrails -}}
{{- end -}}
{{ toYaml $policy }}
{{- end }}

{{/* The service's settings (environment), as in deploy/base's remediator-settings. */}}
{{- define "remediator.settings" -}}
ARGO_SERVER: {{ .Values.argo.server | quote }}
ARGO_NAMESPACE: {{ .Values.argo.namespace | quote }}
SLACK_CHANNEL: {{ .Values.slack.channel | quote }}
REMEDIATOR_INFERENCE_NAMESPACES: {{ join "," .Values.inferenceNamespaces | quote }}
REMEDIATOR_WARMUP_DAEMONSET: kube-system/gpu-warmup
REMEDIATOR_DRY_RUN: {{ .Values.dryRun | toString | quote }}
{{- end }}

{{/* Broker, group and topics, as `remediator ingest` and `worker` read them. */}}
{{- define "remediator.kafkaEnv" -}}
- name: REMEDIATOR_KAFKA_BROKER
  value: {{ .Values.kafka.brokers | quote }}
- name: REMEDIATOR_KAFKA_GROUP
  value: {{ .Values.kafka.group | quote }}
- name: REMEDIATOR_INPUTS_PARTITIONS
  value: {{ .Values.kafka.inputsPartitions | quote }}
- name: REMEDIATOR_COMMANDS_PARTITIONS
  value: {{ .Values.kafka.commandsPartitions | quote }}
- name: REMEDIATOR_GUARD_PARTITIONS
  value: {{ .Values.kafka.guardPartitions | quote }}
- name: REMEDIATOR_KAFKA_REPLICATION
  value: {{ .Values.kafka.replication | quote }}
{{- end }}

{{- define "remediator.workerSelectorLabels" -}}
app.kubernetes.io/name: remediator
app.kubernetes.io/component: worker
{{- end }}

{{- define "remediator.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end }}

{{- define "remediator.warmupResources" -}}
requests: {cpu: 10m, memory: 16Mi}
limits: {memory: 64Mi}
{{- end }}

{{/* The HTTP trigger every sensor posts with: the remediator's /events, bearer token. */}}
{{- define "remediator.sensorHttp" -}}
url: {{ .url | quote }}
method: POST
headers:
  Content-Type: application/cloudevents+json
secureHeaders:
  # Key `authorization` holds "Bearer <webhook-token>".
  - name: Authorization
    valueFrom:
      secretKeyRef:
        name: {{ .secret | quote }}
        key: authorization
timeout: 10
{{- end }}

{{- define "remediator.sensorRetry" -}}
retryStrategy:
  steps: 3
  duration: 2s
  factor: 2
policy:
  status:
    allow: [200, 201, 202, 204]
{{- end }}
