{{- define "address-controller.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "address-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "address-controller.labels" -}}
{{ include "address-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "address-controller.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default (include "address-controller.fullname" .) -}}
{{- end -}}

{{- define "address-controller.webhookServiceName" -}}
{{- printf "%s-webhook" (include "address-controller.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "address-controller.certificateName" -}}
{{- printf "%s-serving-cert" (include "address-controller.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The chart's CA Certificate, whose CA cainjector injects. */}}
{{- define "address-controller.caName" -}}
{{- printf "%s-ca" (include "address-controller.fullname" .) -}}
{{- end -}}

{{- define "address-controller.certSecretName" -}}
{{- if and .Values.certManager.install (not .Values.certManager.enabled) -}}
{{- fail "certManager.install needs certManager.enabled: the cert-manager it installs issues the webhook certificate" -}}
{{- end -}}
{{- if .Values.certManager.enabled -}}
{{- printf "%s-webhook-tls" (include "address-controller.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- required "webhook.certSecretName is required when certManager.enabled is false" .Values.webhook.certSecretName -}}
{{- $_ := required "webhook.caBundle is required when certManager.enabled is false: the API server verifies the webhooks' certificate with it" .Values.webhook.caBundle -}}
{{- end -}}
{{- end -}}

{{/* A webhook's clientConfig: the chart's webhook Service at .path. */}}
{{- define "address-controller.clientConfig" -}}
clientConfig:
  {{- if and (not .root.Values.certManager.enabled) .root.Values.webhook.caBundle }}
  caBundle: {{ .root.Values.webhook.caBundle }}
  {{- end }}
  service:
    name: {{ include "address-controller.webhookServiceName" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
{{- end -}}

{{/*
With cert-manager installed by this release (certManager.install), its CRDs
and webhook exist only once the release's own objects are up: the Issuer and
Certificate are then post-install/post-upgrade hooks, weighted after
cert-manager's startupapicheck hook (weight 1), which waits for its webhook.
*/}}
{{- define "address-controller.certManagerHook" -}}
{{- if .Values.certManager.install -}}
annotations:
  helm.sh/hook: post-install,post-upgrade
  helm.sh/hook-weight: "10"
  helm.sh/hook-delete-policy: before-hook-creation
{{- end -}}
{{- end -}}

{{- /* The core's own requests skip the validating webhooks. */}}
{{- define "address-controller.notTheCore" -}}
matchConditions:
  - name: not-the-core
    expression: request.userInfo.username != "system:serviceaccount:{{ .Release.Namespace }}:{{ include "address-controller.serviceAccountName" . }}"
{{- end }}

{{/*
The container image: a whole reference when image is a string (a mirror's,
by digest, as a package's single image value gives it), else
repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "address-controller.image" -}}
{{- if kindIs "string" .Values.image -}}
{{- .Values.image -}}
{{- else -}}
{{- .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}
{{- end }}
