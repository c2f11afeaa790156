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
A Kubernetes quantity (100Gi, 1.5Ti, 100G, 512000Ki; the schema's diskSize) as a whole number of
bytes, so that two of them can be added.
*/}}
{{- define "training-job.bytes" -}}
{{- $quantity := toString . -}}
{{- $unit := regexFind "(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)$" $quantity -}}
{{- $scale := get (dict "" 1.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15) $unit -}}
{{- int64 (ceil (mulf (float64 (trimSuffix $unit $quantity)) $scale)) -}}
{{- end -}}

{{/*
Requests of the container that uses the GPUs (trainer or NCCL check): resources.requests, the GPUs,
and local disk for the pod's emptyDirs unless resources.requests names ephemeral-storage itself:
tmpSize, plus storage.cache.request when the cache is on. The cache's sizeLimit is only the cap
(past it the kubelet evicts at once, with no grace period): requesting it would keep the pod off
every node whose disk is smaller than the cap, e.g. a 100 GB boot disk (GKE leaves about 45 GiB of
it allocatable). A resources.limits.ephemeral-storage without a request is the request (as the API
server defaults it), so the pod never requests more than its limit.
*/}}
{{- define "training-job.gpuContainerRequests" -}}
{{- $requests := deepCopy .Values.resources.requests -}}
{{- $limit := get .Values.resources.limits "ephemeral-storage" -}}
{{- if and (not (hasKey $requests "ephemeral-storage")) $limit -}}
{{- $_ := set $requests "ephemeral-storage" $limit -}}
{{- end -}}
{{- if not (hasKey $requests "ephemeral-storage") -}}
{{- $bytes := int64 (include "training-job.bytes" .Values.resources.tmpSize) -}}
{{- if and .Values.storage.cache.enabled .Values.storage.cache.request -}}
{{- $bytes = add $bytes (int64 (include "training-job.bytes" .Values.storage.cache.request)) -}}
{{- end -}}
{{- if eq (mod $bytes 1048576) 0 -}}
{{- $_ := set $requests "ephemeral-storage" (printf "%dMi" (div $bytes 1048576)) -}}
{{- else -}}
{{- $_ := set $requests "ephemeral-storage" (printf "%d" $bytes) -}}
{{- end -}}
{{- end -}}
{{- $gpus := (include "training-job.pods" . | fromJson).gpusPerPod | int -}}
{{- if gt $gpus 0 -}}
{{- $_ := set $requests "nvidia.com/gpu" $gpus -}}
{{- end -}}
{{- toYaml $requests -}}
{{- end -}}

{{/* resources.limits plus the GPUs. */}}
{{- define "training-job.gpuContainerLimits" -}}
{{- $limits := deepCopy .Values.resources.limits -}}
{{- $gpus := (include "training-job.pods" . | fromJson).gpusPerPod | int -}}
{{- if gt $gpus 0 -}}
{{- $_ := set $limits "nvidia.com/gpu" $gpus -}}
{{- end -}}
{{- toYaml $limits -}}
{{- end -}}

{{/* The user's sidecars (values `sidecars`), as native sidecars: init containers that keep running. */}}
{{- define "training-job.userSidecars" -}}
{{- range .Values.sidecars }}
- {{- toYaml (merge (dict "restartPolicy" "Always") (omit . "restartPolicy")) | nindent 2 }}
{{- end -}}
{{- end -}}
