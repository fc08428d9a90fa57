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

{{/*
Where `reconciler sync` reads the OperatorAssignment: `git` or `cluster` (values.yaml,
`source`). Anything else fails the render (values.schema.json refuses it first, and
in `helm lint`; this also holds with --skip-schema-validation), and so does the plan
endpoint with `cluster`: GET /plan plans Git revisions only, the binary would keep it off.
*/}}
{{- define "camelk-reconciler.source" -}}
{{- if not (has .Values.source (list "git" "cluster")) }}
{{- fail (printf "source must be \"git\" (follow git.path in git.repository) or \"cluster\" (follow the OperatorAssignment cluster.name that Argo CD or Flux applies), not %q" (toString .Values.source)) }}
{{- end }}
{{- if and (eq .Values.source "cluster") .Values.planEndpoint.tokenSecretName }}
{{- fail "planEndpoint.tokenSecretName needs source: git (GET /plan plans the revisions of a Git repository); unset it with source: cluster" }}
{{- end }}
{{- .Values.source }}
{{- end }}
