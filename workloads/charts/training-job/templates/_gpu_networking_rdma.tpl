{{/*
GPUDirect-RDMA wiring of the training pod (gpuNetworking.mode rdma: A3 Ultra, A4), shared by the
trainer and the NCCL check; _gpu_networking.tpl calls these for mode rdma.

Upstream shape (container-engine-accelerators gpudirect-rdma/nccl-test-a4.yaml at 992db81,
cluster-toolkit v1.95.0 examples/gke-a4/nccl-jobset-example.yaml): the pod joins the RDMA
networks rdma-0..rdma-7 as eth2..eth9 (eth1 is the node's second gVNIC, which pods do not join);
no RxDM sidecar and no device injection, as the RDMA NICs come with the interfaces; NCCL loads the
gIB network plugin from /usr/local/nvidia/lib64 (the installer DaemonSet filled the node's
/home/kubernetes/bin/nvidia/lib64, which the GPU device plugin mounts into GPU containers) and reads
its tuner configuration from /usr/local/gib (the installer's /home/kubernetes/bin/gib, mounted here).
*/}}

{{/* Pod annotations as a JSON object: eth0 on the cluster network, eth2.. on the RDMA networks. */}}
{{- define "training-job.gpuNetworking.rdma.podAnnotations" -}}
{{- $interfaces := list (dict "interfaceName" "eth0" "network" "default") -}}
{{- range $i, $network := .Values.gpuNetworking.rdma.networks -}}
{{- $interfaces = append $interfaces (dict "interfaceName" (printf "eth%d" (add $i 2)) "network" $network) -}}
{{- end -}}
{{- toJson (dict "networking.gke.io/default-interface" "eth0" "networking.gke.io/interfaces" (toJson $interfaces)) -}}
{{- end -}}

{{/* The NCCL container's mount of the installer's gIB directory (scripts and tuner configs), read-only. */}}
{{- define "training-job.gpuNetworking.rdma.volumeMounts" }}
- name: gib
  mountPath: /usr/local/gib
  readOnly: true
{{- end -}}

{{/* type Directory: on a node the installer has not prepared, the pod fails to start, visibly. */}}
{{- define "training-job.gpuNetworking.rdma.volumes" }}
- name: gib
  hostPath:
    path: /home/kubernetes/bin/gib
    type: Directory
{{- end -}}
