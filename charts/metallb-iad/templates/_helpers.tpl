{{- define "metallb-iad.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "metallb-iad.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "metallb-iad.labels" -}}
{{ include "metallb-iad.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "metallb-iad.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "metallb-iad.fullname" .) -}}
{{- end -}}

{{/*
The container image: a whole reference when image is a string (a mirror's,
by digest, as a package's single image value gives it), else
repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "metallb-iad.image" -}}
{{- if kindIs "string" .Values.image -}}
{{- .Values.image -}}
{{- else -}}
{{- .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}
{{- end }}
