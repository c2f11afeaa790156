{{/*
The job's size per pod and in pods, read in one place. A pod is one pod of the job (torchrun calls it a
node: --nnodes, --nproc-per-node); a node is a Kubernetes node, one machine. The keys were once named
after torchrun (job.nodes.*, job.procsPerNode, resources.gpusPerNode): those still work, each new key
else its old one else the default. Both names with the same value are one value (an override under
one name over a profile under the other); two different values fail the render, naming both.
Returns JSON: {"min", "max", "replicas" (absent: max), "procsPerPod", "gpusPerPod"}.
*/}}
{{- define "training-job.pods" -}}
{{- $v := .Values -}}
{{- $new := $v.job.pods | default (dict) -}}
{{- $old := $v.job.nodes | default (dict) -}}
{{- $out := dict -}}
{{- range $key, $default := dict "min" 1 "max" 1 "replicas" 0 -}}
{{- $given := index $new $key -}}
{{- $was := index $old $key -}}
{{- include "training-job.sameUnderBothNames" (dict "new" (printf "job.pods.%s" $key) "old" (printf "job.nodes.%s" $key) "given" $given "was" $was) -}}
{{- $value := $default -}}
{{- if not (kindIs "invalid" $was) }}{{ $value = $was }}{{ end -}}
{{- if not (kindIs "invalid" $given) }}{{ $value = $given }}{{ end -}}
{{- /* replicas stays unset (the Job runs max pods) unless given */ -}}
{{- if or (ne $key "replicas") (not (and (kindIs "invalid" $given) (kindIs "invalid" $was))) -}}
{{- $_ := set $out $key (int $value) -}}
{{- end -}}
{{- end -}}
{{- range $renamed := list
  (dict "section" "job" "new" "procsPerPod" "old" "procsPerNode" "default" 1)
  (dict "section" "resources" "new" "gpusPerPod" "old" "gpusPerNode" "default" 0) -}}
{{- $values := index $v $renamed.section -}}
{{- $given := index $values $renamed.new -}}
{{- $was := index $values $renamed.old -}}
{{- include "training-job.sameUnderBothNames" (dict "new" (printf "%s.%s" $renamed.section $renamed.new) "old" (printf "%s.%s" $renamed.section $renamed.old) "given" $given "was" $was) -}}
{{- $value := $renamed.default -}}
{{- if not (kindIs "invalid" $was) }}{{ $value = $was }}{{ end -}}
{{- if not (kindIs "invalid" $given) }}{{ $value = $given }}{{ end -}}
{{- $_ := set $out $renamed.new (int $value) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
A key set under its new and its old name: fine when the two are equal, else one line naming both values
and how to keep the user's (under the new name alone). Helm's --reuse-values brings back the old chart's
defaults under the old names, hence the hint for a release installed before the rename.
*/}}
{{- define "training-job.sameUnderBothNames" -}}
{{- if and (not (kindIs "invalid" .given)) (not (kindIs "invalid" .was)) (ne (int .given) (int .was)) -}}
{{- fail (printf "%s is %d but its old name %s is %d: put your value under the new name only (set %s=%d instead of %s=%d; to upgrade a release installed before the rename, use --reset-then-reuse-values, not --reuse-values)" .new (int .given) .old (int .was) .new (int .was) .old (int .was)) -}}
{{- end -}}
{{- end -}}

{{/* One line per old key the values use, naming its new key (NOTES.txt prints them). */}}
{{- define "training-job.renamedKeys" -}}
{{- $v := .Values -}}
{{- range $key := list "min" "max" "replicas" -}}
{{- if not (kindIs "invalid" (index ($v.job.nodes | default (dict)) $key)) }}
DEPRECATED: job.nodes.{{ $key }} is now job.pods.{{ $key }} (the same pods of the job); rename it.
{{- end -}}
{{- end -}}
{{- if not (kindIs "invalid" $v.job.procsPerNode) }}
DEPRECATED: job.procsPerNode is now job.procsPerPod (the same processes per pod); rename it.
{{- end -}}
{{- if not (kindIs "invalid" $v.resources.gpusPerNode) }}
DEPRECATED: resources.gpusPerNode is now resources.gpusPerPod (the same GPUs per pod); rename it.
{{- end -}}
{{- end -}}
