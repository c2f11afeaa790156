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

Security: the trainer keeps the hardened profile (non-root, every capability dropped, not privileged);
rdma mode adds no capability. Verbs memory registration may pin pages up to RLIMIT_MEMLOCK, or beyond
it only with CAP_IPC_LOCK in the effective set (Linux drivers/infiniband/core/umem.c ib_umem_get).
Google's own A4 test pods run with no securityContext at all (container-engine-accelerators
gpudirect-rdma/nccl-test-a4.yaml and nccl-test-a4-autopilot.yaml at 992db81: the runtime's default
capabilities, which do not include IPC_LOCK), so the recipe relies on the node's memlock limit, which
is the same for uid 10001. Adding IPC_LOCK here would not reach a non-root process anyway: Kubernetes
puts added capabilities in the bounding and inheritable sets but not the ambient one, so they are
gone after exec (kubernetes/kubernetes#56374). The verbs devices are world-accessible (0666,
uverbs_main.c uverbs_devnode). cluster-toolkit v1.95.0 examples/gke-a4/nccl-jobset-example.yaml runs
privileged (its diagnostic image runs mpirun as root, after an nvidia-smi health-check init
container); Google's unprivileged test pods above show that gIB itself does not need it. The NCCL
check prints each rank's `ulimit -l`, so a real node shows the limit the trainer got.
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
