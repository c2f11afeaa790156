{{/*
Names, labels, the image reference and the hardened security contexts every workload shares.
*/}}

{{/*
The Job, its Services and ServiceAccount are named after the release. 50 characters leave room
for the pod hostname "<job>-<index>" and pod name "<job>-<index>-<suffix>" within 63.
*/}}
{{- define "training-job.fullname" -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "training-job.serviceAccountName" -}}
{{- default (include "training-job.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/*
Selector labels of one component (trainer, tensorboard, etcd): stable for the life of a release,
so they may sit in pod templates. Argument: (list $ "component").
*/}}
{{- define "training-job.selectorLabels" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ $ctx.Chart.Name }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/*
Labels for object metadata, never pod templates (a chart upgrade must not touch those).
Argument: (list $) or (list $ "component").
*/}}
{{- define "training-job.labels" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ $ctx.Chart.Name }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
{{- if gt (len .) 1 }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" $ctx.Chart.Name $ctx.Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* "repository@sha256:..." when a digest is given (immutable), else "repository:tag". */}}
{{- define "training-job.imageRef" -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end -}}

{{/* Where the built-in trainer writes checkpoints, TensorBoard events and the export. */}}
{{- define "training-job.runDir" -}}
{{- default (printf "%s/runs/%s" (trimSuffix "/" .Values.storage.mountPath) .Release.Name) .Values.train.out -}}
{{- end -}}

{{/* True (non-empty) when torchrun runs our package's `train` built from .Values.train. */}}
{{- define "training-job.usesBuiltInTrainer" -}}
{{- if and (not .Values.ncclCheck.enabled) (not .Values.command.script) (eq .Values.command.module "training") (empty .Values.command.args) -}}
true
{{- end -}}
{{- end -}}

{{- define "training-job.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
fsGroup: {{ .Values.securityContext.fsGroup }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Every container: no root, no privilege escalation, no capabilities, read-only root filesystem. */}}
{{- define "training-job.containerSecurityContext" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* With a read-only root filesystem, HOME and every cache live on the writable /tmp volume. */}}
{{- define "training-job.writableHomeEnv" -}}
- name: HOME
  value: /tmp
- name: XDG_CACHE_HOME
  value: /tmp/.cache
{{- end -}}

{{/*
A size given in Mi, Gi or Ti (the schema allows only these for tmpSize and the cache's sizeLimit)
as a whole number of MiB, so that two of them can be added.
*/}}
{{- define "training-job.mebibytes" -}}
{{- $quantity := toString . -}}
{{- $unit := regexFind "(Mi|Gi|Ti)$" $quantity -}}
{{- mul (int64 (trimSuffix $unit $quantity)) (get (dict "Mi" 1 "Gi" 1024 "Ti" 1048576) $unit) -}}
{{- end -}}

{{/*
Requests of the container that uses the GPUs (trainer or NCCL check): resources.requests, the GPUs,
and local disk for what the pod's emptyDirs may hold (/tmp, and the data cache when enabled) unless
resources.requests names ephemeral-storage itself. The scheduler then places the pod only on a node
with that much room; past an emptyDir's sizeLimit the kubelet evicts at once, with no grace period.
*/}}
{{- define "training-job.gpuContainerRequests" -}}
{{- $requests := deepCopy .Values.resources.requests -}}
{{- if not (hasKey $requests "ephemeral-storage") -}}
{{- $mib := int64 (include "training-job.mebibytes" .Values.resources.tmpSize) -}}
{{- if .Values.storage.cache.enabled -}}
{{- $mib = add $mib (int64 (include "training-job.mebibytes" .Values.storage.cache.sizeLimit)) -}}
{{- end -}}
{{- $_ := set $requests "ephemeral-storage" (printf "%dMi" $mib) -}}
{{- end -}}
{{- if gt (int .Values.resources.gpusPerNode) 0 -}}
{{- $_ := set $requests "nvidia.com/gpu" (int .Values.resources.gpusPerNode) -}}
{{- end -}}
{{- toYaml $requests -}}
{{- end -}}

{{/* resources.limits plus the GPUs. */}}
{{- define "training-job.gpuContainerLimits" -}}
{{- $limits := deepCopy .Values.resources.limits -}}
{{- if gt (int .Values.resources.gpusPerNode) 0 -}}
{{- $_ := set $limits "nvidia.com/gpu" (int .Values.resources.gpusPerNode) -}}
{{- end -}}
{{- toYaml $limits -}}
{{- end -}}

{{/* The user's sidecars (values `sidecars`), as native sidecars: init containers that keep running. */}}
{{- define "training-job.userSidecars" -}}
{{- range .Values.sidecars }}
- {{- toYaml (merge (dict "restartPolicy" "Always") (omit . "restartPolicy")) | nindent 2 }}
{{- end -}}
{{- end -}}
