{{/*
Kueue Topology Aware Scheduling for a multi-node job (kueue.preferredTopology set by the stack where
the GPU pool's flavor has a Topology): the pod template asks Kueue to place all pods within one domain
of that node label if it can, and in the tightest wider domain if not (kueue v0.19.2
apis/kueue/v1beta2/topology_types.go PodSetPreferredTopologyAnnotation; cluster-toolkit v1.95.0
examples/gke-a4/nccl-jobset-example.yaml prefers kubernetes.io/hostname the same way). Preferred, not
required: a job that does not fit one domain still starts. The user's podAnnotations win.
*/}}
{{- define "training-job.kueueTopologyAnnotations" -}}
{{- $annotations := dict -}}
{{- if and .Values.kueue.queueName .Values.kueue.preferredTopology (gt (int (include "training-job.pods" . | fromJson).max) 1) -}}
{{- $_ := set $annotations "kueue.x-k8s.io/podset-preferred-topology" .Values.kueue.preferredTopology -}}
{{- end -}}
{{- toJson $annotations -}}
{{- end -}}
