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
{{- $hosts := list -}}
{{- range $index := until (int .Values.job.nodes.max) -}}
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
      value: {{ int .Values.resources.gpusPerNode | quote }}
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
