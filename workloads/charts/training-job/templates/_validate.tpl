{{/*
Mistakes values.schema.json cannot express (they relate two fields). Each fails the render with one
line that names the field. Included once, from job.yaml; renders nothing when the values are sound.
*/}}
{{- define "training-job.validate" -}}
{{- $v := .Values -}}
{{- $pods := include "training-job.pods" . | fromJson -}}

{{- /* The release name becomes the headless Service name, which must be a DNS-1035 label. */ -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" .Release.Name) -}}
{{- fail (printf "release name %q: must start with a letter and contain only lowercase letters, digits and '-' (it names the rendezvous Service)" .Release.Name) -}}
{{- end -}}

{{- /* The Job, Service and NetworkPolicy find the pods by these; a podLabels entry would override them. */ -}}
{{- range $key, $_ := $v.podLabels -}}
{{- if or (hasPrefix "app.kubernetes.io/" $key) (hasPrefix "batch.kubernetes.io/" $key) (eq $key "job-name") (eq $key "controller-uid") -}}
{{- fail (printf "podLabels.%s: the chart and the Job controller set this label (pods are selected by it); use a key of your own" $key) -}}
{{- end -}}
{{- end -}}

{{- /* Two containers of one pod may not share a name (the API server refuses the Job). */ -}}
{{- $sidecarNames := dict -}}
{{- range $v.sidecars -}}
{{- if hasKey $sidecarNames .name -}}
{{- fail (printf "sidecars: the name %q is given twice; container names in a pod must be unique" .name) -}}
{{- end -}}
{{- $_ := set $sidecarNames .name true -}}
{{- end -}}

{{- if gt (int $pods.min) (int $pods.max) -}}
{{- fail (printf "job.pods.min (%d) must not exceed job.pods.max (%d)" (int $pods.min) (int $pods.max)) -}}
{{- end -}}
{{- if not (kindIs "invalid" $pods.replicas) -}}
{{- if or (lt (int $pods.replicas) (int $pods.min)) (gt (int $pods.replicas) (int $pods.max)) -}}
{{- fail (printf "job.pods.replicas (%d) must lie between job.pods.min (%d) and job.pods.max (%d)" (int $pods.replicas) (int $pods.min) (int $pods.max)) -}}
{{- end -}}
{{- end -}}

{{- $check := $v.ncclCheck.enabled -}}
{{- $gpuNet := $v.gpuNetworking.mode -}}
{{- /* The check runs its mode's NCCL plugin image, not the training image. */ -}}
{{- if and (not (and $check (eq $v.ncclCheck.runner "nccl-tests"))) (not $v.image.digest) (not $v.image.tag) -}}
{{- fail "image.digest or image.tag is required (a digest pins the exact image)" -}}
{{- end -}}
{{- $tbImage := $v.tensorboard.image | default dict -}}
{{- if and $tbImage.repository (not $tbImage.digest) (not $tbImage.tag) -}}
{{- fail "tensorboard.image.digest or tensorboard.image.tag is required with tensorboard.image.repository" -}}
{{- end -}}

{{- /* A3 machines have 8 GPUs, and the device-injection annotation hands all 8 to the RxDM. */ -}}
{{- if and (ne $gpuNet "none") (ne (int $pods.gpusPerPod) 8) -}}
{{- fail (printf "gpuNetworking.mode %s needs resources.gpusPerPod 8 (got %d): one pod per A3 node, all 8 GPUs" $gpuNet (int $pods.gpusPerPod)) -}}
{{- end -}}

{{- if $check -}}
{{- if eq $gpuNet "none" -}}
{{- fail "ncclCheck.enabled needs gpuNetworking.mode tcpx or tcpxo: the check runs that mode's NCCL plugin image over its wiring" -}}
{{- end -}}
{{- if or (ne (int $pods.min) (int $pods.max)) (lt (int $pods.max) 2) -}}
{{- fail (printf "ncclCheck.enabled needs job.pods.min = job.pods.max >= 2 (got %d:%d): mpirun starts on a fixed set of pods" (int $pods.min) (int $pods.max)) -}}
{{- end -}}
{{- end -}}

{{- $gpus := int $pods.gpusPerPod -}}
{{- if and (gt $gpus 0) (ne $gpus (int $pods.procsPerPod)) -}}
{{- fail (printf "job.procsPerPod (%d) must equal resources.gpusPerPod (%d): torchrun starts one process per GPU" (int $pods.procsPerPod) $gpus) -}}
{{- end -}}

{{- if and (include "training-job.usesBuiltInTrainer" .) (gt (int $pods.max) 1) (not $v.storage.pvc) -}}
{{- fail "storage.pvc is required when job.pods.max > 1: all pods must share the run directory for checkpoints" -}}
{{- end -}}

{{- if and $v.tensorboard.enabled (not $v.storage.pvc) -}}
{{- fail "tensorboard.enabled needs storage.pvc: TensorBoard reads the run's event files from the shared volume" -}}
{{- end -}}

{{- $usesEtcd := ne $v.job.rdzvBackend "c10d" -}}
{{- if and $usesEtcd (not $v.etcd.enabled) -}}
{{- fail (printf "job.rdzvBackend %q needs etcd.enabled=true (the chart's etcd server)" $v.job.rdzvBackend) -}}
{{- end -}}
{{- if and $v.etcd.enabled (not $usesEtcd) -}}
{{- fail "etcd.enabled is true but job.rdzvBackend is c10d: the etcd server would run unused" -}}
{{- end -}}

{{- if and $v.storage.cache.enabled (not $v.storage.cache.sourceUri) -}}
{{- fail "storage.cache.sourceUri is required when storage.cache.enabled (s3://... or gs://...)" -}}
{{- end -}}
{{- end -}}
