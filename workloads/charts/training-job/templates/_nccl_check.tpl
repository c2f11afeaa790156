{{/*
The NCCL check container (ncclCheck.enabled): it takes the trainer's place in the same Job, with
the same gpuNetworking wiring (sidecar, annotations, NCCL env, volumes), and runs
files/nccl-check.sh, which judges nccl-tests' bus bandwidth with files/nccl_busbw.awk.

Exception to the hardened profile, for this diagnostic container only (checkov_skips.yaml): the
nccl-tests image launches its ranks with mpirun over ssh, so it runs as root with sshd's default
capabilities and a writable root filesystem (host keys, hostfiles), as upstream's A3 NCCL tests do.
*/}}
{{- define "training-job.ncclCheckContainer" -}}
{{- $check := .Values.ncclCheck -}}
{{- $settings := include "training-job.gpuNetworking.settings" . | fromJson -}}
{{- $job := include "training-job.fullname" . -}}
{{- $pods := include "training-job.pods" . | fromJson -}}
{{- $hosts := list -}}
{{- range $index := until (int $pods.max) -}}
{{- $hosts = append $hosts (printf "%s-%d.%s.%s.svc.%s" $job $index $job $.Release.Namespace $.Values.job.clusterDomain) -}}
{{- end -}}
- name: nccl-check
  image: {{ include "training-job.imageRef" $settings.plugin | quote }}
  imagePullPolicy: IfNotPresent
  command: ["/bin/bash", "-c", {{ .Files.Get "files/nccl-check.sh" | quote }}, "nccl-check"]
  env:
    {{- with include "training-job.gpuNetworking.env" . | trim }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- range .Values.env }}
    - name: {{ .name }}
      value: {{ .value | quote }}
    {{- end }}
    - name: NCCL_CHECK_HOSTS
      value: {{ join " " $hosts | quote }}
    - name: NCCL_CHECK_GPUS_PER_NODE
      value: {{ int $pods.gpusPerPod | quote }}
    - name: NCCL_CHECK_BENCHMARK
      value: {{ $check.benchmark | quote }}
    - name: NCCL_CHECK_MIN_BYTES
      value: {{ $check.minBytes | quote }}
    - name: NCCL_CHECK_MAX_BYTES
      value: {{ $check.maxBytes | quote }}
    - name: NCCL_CHECK_ITERATIONS
      value: {{ int $check.iterations | quote }}
    - name: NCCL_CHECK_MIN_BUSBW
      value: {{ $check.minBusBandwidthGBps | toString | quote }}
    - name: NCCL_CHECK_CPUS
      value: {{ $settings.ncclTestCpus | quote }}
    - name: NCCL_CHECK_AWK
      value: {{ .Files.Get "files/nccl_busbw.awk" | quote }}
  resources:
    requests:
      {{- include "training-job.gpuContainerRequests" . | nindent 6 }}
    limits:
      {{- include "training-job.gpuContainerLimits" . | nindent 6 }}
  securityContext:
    allowPrivilegeEscalation: false
    privileged: false
    readOnlyRootFilesystem: false
    runAsNonRoot: false
    runAsUser: 0
    runAsGroup: 0
    capabilities:
      drop: ["NET_RAW"]  # sshd and mpirun keep the runtime's other default capabilities
      {{- if eq .Values.gpuNetworking.mode "tcpx" }}
      add: ["IPC_LOCK"]  # as upstream's TCPX nccl-test container
      {{- end }}
  volumeMounts:
    - name: dshm
      mountPath: /dev/shm
    {{- with include "training-job.gpuNetworking.volumeMounts" . | trim }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end -}}


{{/*
The NCCL check in the training image (ncclCheck.runner trainer): the trainer's image, launcher,
rendezvous, NCCL environment and hardened profile, running files/nccl_allreduce.py (mounted from
the release's ConfigMap) instead of the trainer. Only the workload differs from a training pod, so
a NCCL that does not work with the GPUDirect plugin fails here, before any training is scheduled.
*/}}
{{- define "training-job.ncclAllReduceContainer" -}}
{{- $check := .Values.ncclCheck -}}
{{- $settings := include "training-job.gpuNetworking.settings" . | fromJson -}}
- name: nccl-check
  image: {{ include "training-job.imageRef" .Values.image | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: {{ toJson .Values.job.launcher }}
  args:
    {{- concat (include "training-job.torchrunFlags" . | fromJsonArray) (list "/opt/nccl-check/nccl_allreduce.py") | toYaml | nindent 4 }}
  ports:
    - name: rendezvous
      containerPort: {{ int .Values.job.rdzvPort }}
  env:
    {{- if not .Values.job.runId }}
    - name: TRAINSTACK_JOB_UID
      valueFrom:
        fieldRef:
          fieldPath: metadata.labels['batch.kubernetes.io/controller-uid']
    {{- end }}
    {{- include "training-job.writableHomeEnv" . | nindent 4 }}
    - name: PYTHONUNBUFFERED
      value: "1"
    - name: TORCH_DISABLE_SHARE_RDZV_TCP_STORE
      value: "1"
    {{- with include "training-job.gpuNetworking.env" . | trim }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- range .Values.env }}
    - name: {{ .name }}
      value: {{ .value | quote }}
    {{- end }}
    - name: NCCL_CHECK_EXPECTED_NCCL
      value: {{ $settings.nccl | quote }}
    - name: NCCL_CHECK_EXPECTED_NET
      value: {{ $settings.ncclNet | quote }}
    - name: NCCL_CHECK_BYTES
      value: {{ $check.maxBytes | quote }}
    - name: NCCL_CHECK_ITERATIONS
      value: {{ int $check.iterations | quote }}
    - name: NCCL_CHECK_MIN_BUSBW
      value: {{ $check.minBusBandwidthGBps | toString | quote }}
  resources:
    requests:
      {{- include "training-job.gpuContainerRequests" . | nindent 6 }}
    limits:
      {{- include "training-job.gpuContainerLimits" . | nindent 6 }}
  securityContext:
    {{- include "training-job.containerSecurityContext" . | nindent 4 }}
  volumeMounts:
    - name: dshm
      mountPath: /dev/shm
    - name: tmp
      mountPath: /tmp
    - name: nccl-check
      mountPath: /opt/nccl-check
      readOnly: true
    {{- with include "training-job.gpuNetworking.volumeMounts" . | trim }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end -}}
