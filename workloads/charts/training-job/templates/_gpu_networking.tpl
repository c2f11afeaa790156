{{/*
GPUDirect-TCPX / TCPXO wiring of the training pod (gpuNetworking.mode tcpx or tcpxo), shared by the
trainer and the NCCL check, and EFA's (mode efa: its NCCL environment and EFA devices only). Every
helper renders nothing when the mode is none; mode rdma (A3 Ultra, A4) has its own helpers in
_gpu_networking_rdma.tpl, which these call.

Upstream shape (container-engine-accelerators gpudirect-tcpx(o)/nccl-test*.yaml, cluster-toolkit
gpu-direct-workload/scripts/enable-tcpx(o)-in-workload.py): the pod joins the GPU VPCs through the
multi-network annotations; the NRI device injector gives the RxDM container the GPU device files
named in the devices.gke.io annotation; the RxDM (receive data path manager) runs beside the NCCL
process in the same network namespace; NCCL loads the plugin from /usr/local/nvidia/lib64, which
the installer DaemonSet filled on the node and the GPU device plugin mounts into GPU containers.
*/}}

{{/* The selected mode's values (gpuNetworking.tcpx or .tcpxo); call only when the mode is not none. */}}
{{- define "training-job.gpuNetworking.settings" -}}
{{- toJson (index .Values.gpuNetworking .Values.gpuNetworking.mode) -}}
{{- end -}}

{{/* "true" for GKE's GPUDirect modes (tcpx, tcpxo): RxDM sidecar, GPU VPC interfaces, host volumes.
EFA (mode efa) has none of these: the EFA device plugin hands the pod its devices. */}}
{{- define "training-job.gpuNetworking.gpuDirect" -}}
{{- if has .Values.gpuNetworking.mode (list "tcpx" "tcpxo") -}}true{{- end -}}
{{- end -}}

{{/* The pod's EFA devices (mode efa): every EFA of the node, as the EFA device plugin's extended resource. */}}
{{- define "training-job.gpuNetworking.efaResources" -}}
{{- if eq .Values.gpuNetworking.mode "efa" -}}
{{- toJson (dict "vpc.amazonaws.com/efa" (int .Values.gpuNetworking.efa.interfaces)) -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* Name of the RxDM container: the device-injection annotation addresses it by this name. */}}
{{- define "training-job.gpuNetworking.daemonName" -}}
{{- printf "%s-daemon" .Values.gpuNetworking.mode -}}
{{- end -}}

{{/* Pod annotations as a JSON object: eth0 on the cluster network, eth1..N on the GPU networks. */}}
{{- define "training-job.gpuNetworking.podAnnotations" -}}
{{- $annotations := dict -}}
{{- if eq .Values.gpuNetworking.mode "rdma" -}}
{{- $annotations = include "training-job.gpuNetworking.rdma.podAnnotations" . | fromJson -}}
{{- else if include "training-job.gpuNetworking.gpuDirect" . -}}
{{- $settings := include "training-job.gpuNetworking.settings" . | fromJson -}}
{{- $interfaces := list (dict "interfaceName" "eth0" "network" "default") -}}
{{- range $i, $network := $settings.networks -}}
{{- $interfaces = append $interfaces (dict "interfaceName" (printf "eth%d" (add1 $i)) "network" $network) -}}
{{- end -}}
{{- $devices := list -}}
{{- range $gpu := until 8 -}}
{{- $devices = append $devices (printf "/dev/nvidia%d" $gpu) -}}
{{- end -}}
{{- $devices = concat $devices (list "/dev/nvidiactl" "/dev/nvidia-uvm") -}}
{{- if eq .Values.gpuNetworking.mode "tcpxo" -}}
{{- $devices = append $devices "/dev/dmabuf_import_helper" -}}
{{- end -}}
{{- $deviceList := list -}}
{{- range $devices -}}
{{- $deviceList = append $deviceList (printf "- path: %s" .) -}}
{{- end -}}
{{- $_ := set $annotations "networking.gke.io/default-interface" "eth0" -}}
{{- $_ := set $annotations "networking.gke.io/interfaces" (toJson $interfaces) -}}
{{- $_ := set $annotations (printf "devices.gke.io/container.%s" (include "training-job.gpuNetworking.daemonName" .)) (printf "%s\n" (join "\n" $deviceList)) -}}
{{- end -}}
{{- toJson $annotations -}}
{{- end -}}

{{/*
The RxDM daemon as a native sidecar (an init container with restartPolicy Always): it starts before
the trainer and Kubernetes stops it once the trainer has exited, so the Job still completes.
The documented exception to the hardened profile (tests/workloads/checkov_skips.yaml): it runs as
root with the runtime's default capabilities plus NET_ADMIN (TCPXO also NET_BIND_SERVICE), as
upstream runs it (but with seccomp RuntimeDefault, which upstream does not set), to program flow steering on the GPU NICs, reads
the node's /sys and /proc/sys through hostPath, and its root filesystem stays writable (the TCPXO
entrypoint chmods itself and writes its health-check file). No other container gets any of this.
*/}}
{{- define "training-job.gpuNetworking.sidecar" -}}
{{- if include "training-job.gpuNetworking.gpuDirect" . -}}
{{- $mode := .Values.gpuNetworking.mode -}}
{{- $settings := include "training-job.gpuNetworking.settings" . | fromJson -}}
- name: {{ include "training-job.gpuNetworking.daemonName" . }}
  image: {{ include "training-job.imageRef" $settings.rxdm | quote }}
  imagePullPolicy: IfNotPresent
  restartPolicy: Always
  {{- if eq $mode "tcpx" }}
  # Upstream's daemon flags. umask 0: the trainer (uid {{ .Values.securityContext.runAsUser }}, not root) must be
  # able to connect to the sockets the root daemon creates; the volume is private to this pod.
  command: ["/bin/bash", "-c"]
  args:
    - umask 0000 && exec /tcpgpudmarxd/build/app/tcpgpudmarxd --gpu_nic_preset a3vm --gpu_shmem_type fd --uds_path /run/tcpx --setup_param "--verbose 128 2 0 "
  {{- else }}
  command: ["/bin/sh", "-c"]
  args:
    - |
      set -ex
      chmod 755 /fts/entrypoint_rxdm_container.sh
      /fts/entrypoint_rxdm_container.sh --num_hops=2
  {{- end }}
  env:
    - name: LD_LIBRARY_PATH
      value: /usr/local/nvidia/lib64
    {{- if eq $mode "tcpxo" }}
    # The daemon writes this file once initialised (container-engine-accelerators
    # gpudirect-tcpxo/best-practice.md); the startup probe holds the trainer back until then, and
    # fails the pod early on a node whose host components are broken.
    - name: HEALTH_CHECK_LOG_FILE
      value: /run/health-check
    {{- end }}
  {{- if eq $mode "tcpxo" }}
  startupProbe:
    exec:
      command: ["cat", "/run/health-check"]
    periodSeconds: 5
    failureThreshold: 24
  {{- end }}
  resources:
    {{- toYaml .Values.gpuNetworking.rxdmResources | nindent 4 }}
  securityContext:
    allowPrivilegeEscalation: false
    privileged: false
    readOnlyRootFilesystem: false
    runAsNonRoot: false
    runAsUser: 0
    runAsGroup: 0
    # Upstream's set (container-engine-accelerators gpudirect-tcpx(o)/nccl-test-latest.yaml): the
    # runtime's default capabilities plus these. A reduced set (drop ALL) has not been proven on A3
    # hardware, and the daemon's flow-steering and socket setup may need more than it adds.
    capabilities:
      add: {{ ternary (list "NET_ADMIN") (list "NET_ADMIN" "NET_BIND_SERVICE") (eq $mode "tcpx") | toJson }}
    seccompProfile:
      type: RuntimeDefault
  volumeMounts:
    - name: nvidia-libraries
      mountPath: /usr/local/nvidia/lib64
      readOnly: true
    - name: host-sys
      mountPath: /hostsysfs
    - name: host-proc-sys
      mountPath: /hostprocsysfs
    {{- if eq $mode "tcpx" }}
    - name: tcpx-socket
      mountPath: /run/tcpx
    {{- end }}
{{- end -}}
{{- end -}}

{{/*
The NCCL environment of the container that runs NCCL, from gpuNetworking.<mode>.ncclEnv. A name
that .Values.env also sets is left out here: the user's entry (rendered after) wins, once.
*/}}
{{- define "training-job.gpuNetworking.env" -}}
{{- if ne .Values.gpuNetworking.mode "none" -}}
{{- $settings := include "training-job.gpuNetworking.settings" . | fromJson -}}
{{- $userNames := list -}}
{{- range .Values.env -}}
{{- $userNames = append $userNames .name -}}
{{- end -}}
{{- range $name, $value := $settings.ncclEnv -}}
{{- if not (has $name $userNames) }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Mounts of the container that runs NCCL: the RxDM socket (TCPX) or the LLCM devices (TCPXO). */}}
{{- define "training-job.gpuNetworking.volumeMounts" -}}
{{- if eq .Values.gpuNetworking.mode "tcpx" }}
- name: tcpx-socket
  mountPath: /run/tcpx
{{- else if eq .Values.gpuNetworking.mode "tcpxo" }}
# The trainer's one hostPath: NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY (the TCPXO plugin's devices).
- name: aperture-devices
  mountPath: /dev/aperture_devices
{{- else if eq .Values.gpuNetworking.mode "rdma" }}
{{- include "training-job.gpuNetworking.rdma.volumeMounts" . }}
{{- end -}}
{{- end -}}

{{/* Pod volumes. type Directory: on a node without them the pod fails to start, visibly. */}}
{{- define "training-job.gpuNetworking.volumes" -}}
{{- if eq .Values.gpuNetworking.mode "rdma" }}
{{- include "training-job.gpuNetworking.rdma.volumes" . }}
{{- else if include "training-job.gpuNetworking.gpuDirect" . }}
- name: nvidia-libraries
  hostPath:
    path: /home/kubernetes/bin/nvidia/lib64
    type: Directory
- name: host-sys
  hostPath:
    path: /sys
    type: Directory
- name: host-proc-sys
  hostPath:
    path: /proc/sys
    type: Directory
{{- if eq .Values.gpuNetworking.mode "tcpx" }}
# The RxDM's Unix sockets, shared with the NCCL process only (not the node's /run/tcpx).
- name: tcpx-socket
  emptyDir: {}
{{- else }}
- name: aperture-devices
  hostPath:
    path: /dev/aperture_devices
    type: Directory
{{- end }}
{{- end -}}
{{- end -}}
