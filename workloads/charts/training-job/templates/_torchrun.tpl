{{/*
The trainer container's argv after `torchrun`: launcher flags, then the target and its arguments.
Every pod gets the same list; torchrun's elastic rendezvous assigns ranks, nobody types an address.
*/}}

{{/*
c10d: pod 0 hosts the store. Its fully qualified name is in its own /etc/hosts (written by the
kubelet because the pod has hostname + subdomain), so torchrun on pod 0 recognises itself as the
host without waiting for DNS; the other pods reach it through the headless Service.
*/}}
{{- define "training-job.rdzvEndpoint" -}}
{{- $job := include "training-job.fullname" . -}}
{{- $suffix := printf "%s.svc.%s" .Release.Namespace .Values.job.clusterDomain -}}
{{- if eq .Values.job.rdzvBackend "c10d" -}}
{{- printf "%s-0.%s.%s:%d" $job $job $suffix (int .Values.job.rdzvPort) -}}
{{- else -}}
{{- printf "%s-etcd.%s:%d" $job $suffix (int .Values.etcd.port) -}}
{{- end -}}
{{- end -}}

{{/*
Default run id: the release name (readable in logs) plus the Job's UID, which Kubernetes expands
from the TRAINSTACK_JOB_UID env var. Unique per Job object, so a reinstalled release never joins
a stale rendezvous; stable for the Job's life, so upgrades and pod restarts keep it.
*/}}
{{- define "training-job.runId" -}}
{{- default (printf "%s-$(TRAINSTACK_JOB_UID)" (include "training-job.fullname" .)) .Values.job.runId -}}
{{- end -}}

{{/* `train` flags of our package, from .Values.train (see trainstack/contract/cli.py). */}}
{{- define "training-job.trainArgs" -}}
{{- $t := .Values.train -}}
{{- $args := list "train" "--data" $t.data "--out" (include "training-job.runDir" .) "--preset" $t.preset -}}
{{- if $t.initFrom -}}
{{- $args = concat $args (list "--init-from" $t.initFrom) -}}
{{- end -}}
{{- $args = concat $args (list "--max-steps" (toString (int $t.maxSteps)) "--batch-size" (toString (int $t.batchSize))) -}}
{{- if not (kindIs "invalid" $t.globalBatchSize) -}}
{{- $args = concat $args (list "--global-batch-size" (toString (int $t.globalBatchSize))) -}}
{{- end -}}
{{- if $t.checkpointEveryMinutes -}}
{{- /* printf, not toString: a float renders as 10 or 0.5, never 1e+01 */ -}}
{{- $args = concat $args (list "--checkpoint-every-minutes" (printf "%g" (float64 $t.checkpointEveryMinutes))) -}}
{{- end -}}
{{- /* Pod logs are not a terminal: periodic log lines instead of a progress bar. */ -}}
{{- $args = concat $args (list "--checkpoint-every" (toString (int $t.checkpointEvery)) "--no-progress") $t.extraArgs -}}
{{- toJson $args -}}
{{- end -}}

{{/* torchrun's own flags (a JSON list): the trainer and the in-image NCCL check share them. */}}
{{- define "training-job.torchrunFlags" -}}
{{- $j := .Values.job -}}
{{- $pods := include "training-job.pods" . | fromJson -}}
{{- /* torchrun's words: each pod of the job is one of its nodes. */ -}}
{{- toJson (list
  (printf "--nnodes=%d:%d" (int $pods.min) (int $pods.max))
  (printf "--nproc-per-node=%d" (int $pods.procsPerPod))
  (printf "--max-restarts=%d" (int $j.maxRestarts))
  (printf "--rdzv-backend=%s" $j.rdzvBackend)
  (printf "--rdzv-endpoint=%s" (include "training-job.rdzvEndpoint" .))
  (printf "--rdzv-id=%s" (include "training-job.runId" .))
  (printf "--rdzv-conf=join_timeout=%d,last_call_timeout=%d" (int $j.joinTimeoutSeconds) (int $j.lastCallTimeoutSeconds))) -}}
{{- end -}}

{{- define "training-job.torchrunArgs" -}}
{{- $args := include "training-job.torchrunFlags" . | fromJsonArray -}}
{{- $c := .Values.command -}}
{{- if $c.script -}}
{{- $args = concat $args (list $c.script) $c.args -}}
{{- else if include "training-job.usesBuiltInTrainer" . -}}
{{- $args = concat $args (list "-m" $c.module) (include "training-job.trainArgs" . | fromJsonArray) -}}
{{- else -}}
{{- $args = concat $args (list "-m" $c.module) $c.args -}}
{{- end -}}
{{- toYaml $args -}}
{{- end -}}
