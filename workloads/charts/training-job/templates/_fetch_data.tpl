{{/*
Init container that copies the data set from object storage onto the node-local cache volume
before torchrun starts. The cloud CLI comes from a small pinned image chosen by the URI scheme
(our training image has neither CLI); credentials come from the ServiceAccount's cloud identity.
*/}}
{{- define "training-job.fetchDataContainer" -}}
{{- $cache := .Values.storage.cache -}}
{{- $isS3 := hasPrefix "s3://" $cache.sourceUri -}}
{{- $image := ternary $cache.images.s3 $cache.images.gs $isS3 -}}
- name: fetch-data
  image: {{ include "training-job.imageRef" $image | quote }}
  imagePullPolicy: IfNotPresent
  {{- if $isS3 }}
  command: ["aws", "s3", "sync", "--no-progress", {{ $cache.sourceUri | quote }}, {{ $cache.mountPath | quote }}]
  {{- else }}
  command: ["gcloud", "storage", "rsync", "--recursive", {{ $cache.sourceUri | quote }}, {{ $cache.mountPath | quote }}]
  {{- end }}
  env:
    {{- include "training-job.writableHomeEnv" . | nindent 4 }}
    {{- if not $isS3 }}
    # gcloud keeps its configuration and logs here; the root filesystem is read-only.
    - name: CLOUDSDK_CONFIG
      value: /tmp/gcloud
    {{- end }}
  resources:
    {{- toYaml $cache.resources | nindent 4 }}
  securityContext:
    {{- include "training-job.containerSecurityContext" . | nindent 4 }}
  volumeMounts:
    - name: tmp
      mountPath: /tmp
    - name: cache
      mountPath: {{ $cache.mountPath }}
{{- end -}}
