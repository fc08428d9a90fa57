{{/* The reconciler's name: fixed, as its lock Lease (camelk-reconciler-lock) is. */}}
{{- define "camelk-reconciler.name" -}}
camelk-reconciler
{{- end }}

{{- define "camelk-reconciler.serviceAccountName" -}}
{{- default (include "camelk-reconciler.name" .) .Values.serviceAccount.name }}
{{- end }}

{{- define "camelk-reconciler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "camelk-reconciler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "camelk-reconciler.labels" -}}
{{ include "camelk-reconciler.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: camelk-gitops
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "camelk-reconciler.image" -}}
{{ .Values.image.repository }}:{{ default (printf "v%s" .Chart.AppVersion) .Values.image.tag }}
{{- end }}
