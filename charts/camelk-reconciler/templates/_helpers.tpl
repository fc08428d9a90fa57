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

{{- define "camelk-reconciler.knownHostsConfigMapName" -}}
{{ include "camelk-reconciler.name" . }}-known-hosts
{{- end }}

{{/*
The Git credentials the pod mounts, as YAML: `token` (the Secret with the key token),
`ssh` (the Secret with ssh-privatekey) and `knownHostsConfigMap` (the ConfigMap with
known_hosts), each empty when not used; all empty with source: cluster, which reads
no Git. Fails on values that contradict each other, as the binary would refuse them
(--credentials-secret excludes the files) or silently ignore one of them.
*/}}
{{- define "camelk-reconciler.gitCredentials" -}}
{{- $git := eq (include "camelk-reconciler.source" .) "git" }}
{{- $ssh := .Values.git.ssh }}
{{- if and $git .Values.git.credentialsSecret (or .Values.git.credentials.secretName $ssh.secretName $ssh.knownHosts $ssh.knownHostsConfigMap) }}
{{- fail "git.credentialsSecret (read through the API) excludes git.credentials.secretName and git.ssh.* (mounted files): set one or the other" }}
{{- end }}
{{- if and $ssh.passphrase (not $ssh.secretName) }}
{{- fail "git.ssh.passphrase needs git.ssh.secretName (the Secret holding ssh-privatekey and ssh-passphrase)" }}
{{- end }}
{{- if and $ssh.knownHosts $ssh.knownHostsConfigMap }}
{{- fail "git.ssh.knownHosts and git.ssh.knownHostsConfigMap: set one (the chart's ConfigMap or yours)" }}
{{- end }}
{{- $knownHosts := "" }}
{{- if $ssh.knownHosts }}
{{- $knownHosts = include "camelk-reconciler.knownHostsConfigMapName" . }}
{{- else if $ssh.knownHostsConfigMap }}
{{- $knownHosts = $ssh.knownHostsConfigMap }}
{{- end }}
token: {{ ternary .Values.git.credentials.secretName "" $git | quote }}
ssh: {{ ternary $ssh.secretName "" $git | quote }}
knownHostsConfigMap: {{ ternary $knownHosts "" $git | quote }}
{{- end }}
