{{/* The image: repository@digest, else repository:tag (tag defaults to appVersion). */}}
{{- define "dra-bridge.image" -}}
{{- if not .Values.image.repository -}}
{{- fail "image.repository: no image is published; build it (docker build -t REGISTRY/dra-bridge:TAG .), push it, and set image.repository (and image.tag)" -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* Labels on every object: kustomize's part-of, plus Helm's own. */}}
{{- define "dra-bridge.labels" -}}
app.kubernetes.io/part-of: dra-bridge
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* Which pods reach the webhooks: those asking for a legacy GPU resource (mutate and validate). */}}
{{- define "dra-bridge.legacyGpuPod" -}}
(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))
.exists(c, has(c.resources) && (
(has(c.resources.limits) && c.resources.limits.exists(k,
k.startsWith('nvidia.com/') || k.startsWith('volcano.sh/') || k == 'kubernetes.io/gpu' || k.startsWith('koordinator.sh/gpu')))
|| (has(c.resources.requests) && c.resources.requests.exists(k,
k.startsWith('nvidia.com/') || k.startsWith('volcano.sh/') || k == 'kubernetes.io/gpu' || k.startsWith('koordinator.sh/gpu')))))
{{- end -}}

{{/* Which pods reach validation: any extended resource (legacy ones, and those a DeviceClass
serves through DRA: deviceclass.resource.kubernetes.io/<class>, any extendedResourceName). */}}
{{- define "dra-bridge.extendedResourcePod" -}}
(object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : []))
.exists(c, has(c.resources) && (
(has(c.resources.limits) && c.resources.limits.exists(k, k.contains('/')))
|| (has(c.resources.requests) && c.resources.requests.exists(k, k.contains('/')))))
{{- end -}}

{{/* The opt-in namespace selector both webhooks use; never the release's own namespace. */}}
{{- define "dra-bridge.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: {{ .Values.webhook.optInLabel.key }}
      operator: In
      values: [{{ .Values.webhook.optInLabel.value | quote }}]
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: [{{ .Release.Namespace | quote }}]
{{- end -}}

{{/* Validation applies where admins say (the policy's rules), not only where pods migrate:
every namespace but ours and those labelled out. */}}
{{- define "dra-bridge.validationNamespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ prepend .Values.webhook.validationExcludedNamespaces .Release.Namespace | uniq | toJson }}
{{- end -}}


{{/* Pod-level settings both workloads share. */}}
{{- define "dra-bridge.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Values an older release lacks, from this chart's values.yaml: `helm upgrade --reuse-values` keeps
the previous release's values, so a key this version added would be nil (defaults/values.yaml
   links to values.yaml: .Files never holds values.yaml itself). Fills only keys that
are missing (a value the admin set, false included, is kept); every template includes it first.
*/}}
{{- define "dra-bridge.defaults" -}}
{{- include "dra-bridge.fill" (list .Values (.Files.Get "defaults/values.yaml" | fromYaml)) -}}
{{- end -}}

{{- define "dra-bridge.fill" -}}
{{- $into := index . 0 -}}
{{- range $key, $value := index . 1 -}}
{{- if not (hasKey $into $key) -}}
{{- $_ := set $into $key $value -}}
{{- else if and (kindIs "map" $value) (kindIs "map" (index $into $key)) -}}
{{- include "dra-bridge.fill" (list (index $into $key) $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}
