{{/* The file `draguard serve --config` reads; the deployment's checksum annotation hashes it. */}}
{{- define "draguard.config" -}}
{{- /*
The mutating prescheduled rule rewrites only with rules.prescheduled.mutate, and only the mutating
webhook calls it: the webhook switch decides both, and a hand-set mutate that disagrees (a webhook
calling a rule that does nothing, or a setting no webhook uses) is refused rather than rendered.
*/ -}}
{{- $rules := deepCopy .Values.rules -}}
{{- $mutate := .Values.webhooks.prescheduled.mutating.enabled -}}
{{- $prescheduled := $rules.prescheduled | default dict -}}
{{- if and (hasKey $prescheduled "mutate") (ne (toString $prescheduled.mutate) (toString $mutate)) -}}
{{- fail (printf "rules.prescheduled.mutate is %v but webhooks.prescheduled.mutating.enabled is %v: set only webhooks.prescheduled.mutating.enabled, which turns the rule's mutation on or off with the webhook" $prescheduled.mutate $mutate) -}}
{{- end -}}
{{- if $mutate -}}
{{- $_ := set $prescheduled "mutate" true -}}
{{- $_ := set $rules "prescheduled" $prescheduled -}}
{{- end -}}
logLevel: {{ .Values.logLevel }}
snapshot:
  maxAgeSeconds: {{ .Values.snapshot.maxAgeSeconds }}
rules:
  {{- toYaml $rules | nindent 2 }}
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
  {{- with .Values.webhooks.url }}
  {{- /* The API server dials the URL's host: the serving certificate must name it. */}}
  extraHosts: [{{ (urlParse .).hostname | quote }}]
  {{- end }}
  {{- end }}
{{- end -}}
