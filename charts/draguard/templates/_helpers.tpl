{{/* Names, labels and the few values several templates derive the same way. */}}

{{- define "draguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "draguard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "draguard.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "draguard.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "draguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "draguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "draguard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "draguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "draguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "draguard.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret every replica mounts: tls.crt, tls.key (and ca.crt). */}}
{{- define "draguard.tlsSecretName" -}}
{{- if eq .Values.tls.mode "secret" -}}
{{- required "tls.secret.name is required when tls.mode=secret" .Values.tls.secret.name -}}
{{- else -}}
{{- default (printf "%s-tls" (include "draguard.fullname" .)) .Values.tls.secretName -}}
{{- end -}}
{{- end -}}

{{- define "draguard.caSecretName" -}}
{{- printf "%s-ca" (include "draguard.fullname" .) -}}
{{- end -}}

{{- define "draguard.leaseName" -}}
{{- printf "%s-certs" (include "draguard.fullname" .) -}}
{{- end -}}

{{- define "draguard.webhookConfigurationName" -}}
{{- include "draguard.fullname" . -}}
{{- end -}}

{{/* Fixed in draguard (webhook/ledger.py LEDGER_NAME): RBAC grants exactly this name. */}}
{{- define "draguard.ledgerName" -}}
draguard-quota-ledger
{{- end -}}

{{/*
draguard serve --deadline: after it draguard answers per the rules' failurePolicy; past a webhook's
timeoutSeconds the API server applies the webhook's failurePolicy instead, without draguard's
answer. Each webhook's path gets 80% of its own timeoutSeconds (draguard.pathDeadlines), leaving the
answer time to travel; the default, for the catch-all paths /validate and /mutate, is 80% of the
shortest enabled timeoutSeconds (4 s for 5 s, draguard's own default).
*/}}
{{- define "draguard.deadline" -}}
{{- $w := .Values.webhooks -}}
{{- $shortest := 31 -}}{{- /* timeoutSeconds is at most 30: 31 means no webhook is enabled */ -}}
{{- range $cfg := list $w.selectors $w.prescheduled $w.prescheduled.mutating $w.personas $w.drain $w.sharing $w.quota -}}
{{- if $cfg.enabled -}}
{{- $shortest = min $shortest $cfg.timeoutSeconds -}}
{{- end -}}
{{- end -}}
{{- if eq (int $shortest) 31 -}}
{{- $shortest = 5 -}}
{{- end -}}
{{- printf "%.1f" (mulf $shortest 0.8) -}}
{{- end -}}

{{- define "draguard.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "draguard.certificateName" -}}
{{- printf "%s-serving" (include "draguard.fullname" .) -}}
{{- end -}}

{{/*
certManager mode's CA: the Certificate, its Secret and the CA Issuer share this name. Not the
selfManaged CA Secret's name (<fullname>-ca), which the upgrade notes say to delete after leaving
selfManaged mode.
*/}}
{{- define "draguard.certManagerCAName" -}}
{{- printf "%s-root-ca" (include "draguard.fullname" .) -}}
{{- end -}}

{{/* The cert-manager Certificate whose ca.crt the CA injector puts into our caBundles. */}}
{{- define "draguard.injectCAFrom" -}}
{{- $name := include "draguard.certificateName" . -}}
{{- if not .Values.tls.certManager.issuerRef -}}
{{- $name = include "draguard.certManagerCAName" . -}}
{{- end -}}
{{- printf "%s/%s" .Release.Namespace $name -}}
{{- end -}}

{{/*
Fields every webhook shares. Called with a dict: root (the chart context), name (the webhook's name
before .draguard.io), cfg (that webhook's values), path (/validate/<rule> or /mutate/<rule>: draguard
runs only that rule, so a request is decided once per rule and each webhook's failurePolicy and
enabled switch isolate its own rule; plain /validate would run them all), sideEffects, rules (list),
conditions (optional: the name of a template giving its matchConditions) and namespaceGuard
(optional: the webhook sees Namespace objects themselves, see draguard.namespaceSelector).
*/}}
{{- define "draguard.webhook" -}}
{{- $root := .root -}}
- name: {{ .name }}.draguard.io
  admissionReviewVersions: ["v1"]
  clientConfig:
    {{- with $root.Values.webhooks.url }}
    url: {{ printf "%s%s" (trimSuffix "/" .) $.path | quote }}
    {{- else }}
    service:
      name: {{ include "draguard.fullname" $root }}
      namespace: {{ $root.Release.Namespace }}
      path: {{ .path }}
      port: {{ $root.Values.service.port }}
    {{- end }}
    {{- if eq $root.Values.tls.mode "secret" }}
    caBundle: {{ required "tls.secret.caBundle is required when tls.mode=secret" $root.Values.tls.secret.caBundle }}
    {{- end }}
  failurePolicy: {{ .cfg.failurePolicy }}
  matchPolicy: Equivalent
  sideEffects: {{ .sideEffects }}
  timeoutSeconds: {{ .cfg.timeoutSeconds }}
  namespaceSelector:
    {{- include "draguard.namespaceSelector" (dict "root" $root "namespaceGuard" .namespaceGuard) | nindent 4 }}
  {{- with .conditions }}
  matchConditions:
    {{- include . $root | nindent 4 }}
  {{- end }}
  rules:
    {{- toYaml .rules | nindent 4 }}
{{- end -}}

{{/*
Which namespaces a webhook sees. For objects in a namespace: all but kube-system, the release
namespace (a webhook that intercepts its own namespace can block its own recovery) and
excludedNamespaces, none labelled with ignoreLabel, and only those webhooks.namespaceSelector
selects (a staged rollout's test namespaces; empty: all).

For a Namespace object itself the API server matches the selector against that namespace's own new
labels, so a writer could add ignoreLabel in the same update that sets the admin-access label and
skip the check. The webhook guarding Namespaces (namespaceGuard) therefore excludes only the release
namespace, by its kubernetes.io/metadata.name label, which the API server sets and nobody can forge;
its matchCondition keeps every other namespace write away from draguard.
*/}}
{{- define "draguard.namespaceSelector" -}}
{{- $root := .root -}}
{{- $narrow := $root.Values.webhooks.namespaceSelector | default dict -}}
{{- if and (not .namespaceGuard) $narrow.matchLabels }}
matchLabels:
  {{- toYaml $narrow.matchLabels | nindent 2 }}
{{- end }}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      {{- if .namespaceGuard }}
      - {{ $root.Release.Namespace | quote }}
      {{- else }}
      {{- range (concat (list "kube-system" $root.Release.Namespace) $root.Values.excludedNamespaces | uniq) }}
      - {{ . | quote }}
      {{- end }}
      {{- end }}
  {{- if not .namespaceGuard }}
  - key: {{ $root.Values.ignoreLabel }}
    operator: DoesNotExist
  {{- with $narrow.matchExpressions }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- end }}
{{- end -}}

{{/*
Pods are the API server's busiest kind; those without claims never concern draguard. The webhooks'
rules name "pods", which matches no pod subresource, so a pod here is always the pod itself. Only
fields the API server always sets are read: it hands `request` to CEL without its empty fields, so
`request.subResource` on a pod is "no such key", an error that a Fail webhook turns into refusing
every pod without claims.
*/}}
{{- define "draguard.podFilter" -}}
- name: pods-with-resource-claims
  expression: >-
    request.resource.group != '' || request.resource.resource != 'pods' ||
    (has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0)
{{- end -}}

{{/*
Only Namespace writes that set, change or remove the admin-access label reach the personas rule
(the label as a list of zero or one value, before and after): every other namespace create or update
in the cluster, kube-system's included, never waits for draguard.
*/}}
{{- define "draguard.adminAccessFilter" -}}
- name: admin-access-label-changes
  expression: >-
    (has(object.metadata.labels) && 'resource.kubernetes.io/admin-access' in object.metadata.labels ?
    [object.metadata.labels['resource.kubernetes.io/admin-access']] : []) !=
    (request.operation == 'UPDATE' && has(oldObject.metadata.labels) &&
    'resource.kubernetes.io/admin-access' in oldObject.metadata.labels ?
    [oldObject.metadata.labels['resource.kubernetes.io/admin-access']] : [])
{{- end -}}

{{/*
serve --deadline PATH=SECONDS for each enabled webhook (see draguard.deadline), one argument a line.
*/}}
{{- define "draguard.pathDeadlines" -}}
{{- $w := .Values.webhooks -}}
{{- $paths := dict "validate/selectors" $w.selectors "validate/prescheduled" $w.prescheduled "mutate/prescheduled" $w.prescheduled.mutating "validate/personas" $w.personas "validate/drain" $w.drain "validate/sharing" $w.sharing "validate/quota" $w.quota -}}
{{- range $path, $cfg := $paths -}}
{{- if $cfg.enabled }}
- --deadline={{ $path }}={{ printf "%.1f" (mulf $cfg.timeoutSeconds 0.8) }}
{{- end -}}
{{- end -}}
{{- end -}}
