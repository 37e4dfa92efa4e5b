{{/* Pieces both Deployments share (the webhook's and the controller's) --------------------- */}}

{{/* `dragate serve` flags of the policy sources and the cluster, the same for both roles. */}}
{{- define "dragate.sharedServeArgs" -}}
{{- if .Values.serve.inCluster }}
- --in-cluster
{{- end }}
- --host={{ .Values.serve.host }}
{{- if ne .Values.policies.source "cluster" }}
- --policies={{ include "dragate.policiesDir" . }}
{{- end }}
{{- if eq .Values.policies.source "files" }}
- --no-policy-objects
{{- end }}
- --log-level={{ .Values.serve.logLevel }}
# The release namespace: requests there pass unevaluated, and the Lease lives there.
- --own-namespace=$(POD_NAMESPACE)
# Its own requests (managed templates) pass unevaluated.
- --own-service-account=$(POD_SERVICE_ACCOUNT)
{{- end }}

{{- define "dragate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Pod scheduling both roles share: node selector and tolerations. */}}
{{- define "dragate.podPlacement" -}}
{{- with .Values.deployment.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.deployment.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "dragate.env" -}}
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_SERVICE_ACCOUNT
  valueFrom:
    fieldRef:
      fieldPath: spec.serviceAccountName
# Read-only root filesystem: no .pyc writes.
- name: PYTHONDONTWRITEBYTECODE
  value: "1"
- name: PYTHONUNBUFFERED
  value: "1"
{{- with .Values.deployment.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The policy files (or git-sync checkout), scratch space and extra mounts. */}}
{{- define "dragate.sharedVolumeMounts" -}}
{{- if .Values.policies.gitSync.enabled }}
- name: git
  mountPath: {{ include "dragate.gitRoot" . }}
  readOnly: true
{{- else }}
- name: policies
  mountPath: {{ include "dragate.policiesMountPath" . }}
  readOnly: true
{{- end }}
# Scratch space (the root filesystem is read-only).
- name: tmp
  mountPath: /tmp
# gunicorn's worker heartbeat files (worker_tmp_dir, the webhook's): never on a disk.
- name: shm
  mountPath: /dev/shm
{{- with .Values.deployment.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "dragate.sharedVolumes" -}}
{{- $gs := .Values.policies.gitSync }}
{{- if $gs.enabled }}
- name: git
  emptyDir: {}
{{- else }}
- name: policies
  configMap:
    name: {{ include "dragate.policiesConfigMapName" . }}
{{- end }}
- name: tmp
  emptyDir:
    medium: Memory
    sizeLimit: {{ .Values.deployment.tmpSizeLimit }}
- name: shm
  emptyDir:
    medium: Memory
    sizeLimit: {{ .Values.deployment.tmpSizeLimit }}
{{- if and $gs.enabled $gs.credentialsSecret }}
- name: git-secret
  secret:
    secretName: {{ $gs.credentialsSecret }}
    defaultMode: 0440
{{- end }}
{{- with .Values.deployment.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}
