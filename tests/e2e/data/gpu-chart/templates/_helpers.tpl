{{- define "vllm.fullname" -}}
{{ .Release.Name }}-vllm
{{- end }}

{{- define "vllm.selectorLabels" -}}
app.kubernetes.io/name: vllm
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vllm.labels" -}}
{{ include "vllm.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "server.labels" -}}
app.kubernetes.io/name: server
{{- end }}

{{- define "server.env" -}}
env:
  - name: PORT
    value: "{{ .Values.service.port }}"
{{- end }}
