{{/* The file `draguard serve --config` reads; the deployment's checksum annotation hashes it. */}}
{{- define "draguard.config" -}}
logLevel: {{ .Values.logLevel }}
rules:
  {{- toYaml .Values.rules | nindent 2 }}
tls:
  minVersion: {{ .Values.tls.minVersion | quote }}
certificates:
  mode: {{ .Values.tls.mode }}
  service: {{ include "draguard.fullname" . }}
  namespace: {{ .Release.Namespace }}
  tlsSecretName: {{ include "draguard.tlsSecretName" . }}
  {{- if eq .Values.tls.mode "selfManaged" }}
  {{- $s := .Values.tls.selfManaged }}
  caSecretName: {{ include "draguard.caSecretName" . }}
  leaseName: {{ include "draguard.leaseName" . }}
  validatingWebhookConfiguration: {{ include "draguard.webhookConfigurationName" . }}
  {{- if .Values.webhooks.prescheduled.mutating.enabled }}
  mutatingWebhookConfiguration: {{ include "draguard.webhookConfigurationName" . }}
  {{- end }}
  caValidity: {{ $s.caValidity }}
  servingValidity: {{ $s.servingValidity }}
  renewFraction: {{ $s.renewFraction }}
  {{- with $s.renewBefore }}
  renewBefore: {{ . }}
  {{- end }}
  overlap: {{ $s.overlap }}
  keyAlgorithm: {{ $s.keyAlgorithm }}
  {{- end }}
{{- end -}}
