{{/* Labels every object carries; straitctl uninstall selects on
     app.kubernetes.io/instance. */}}
{{- define "strait.labels" -}}
app.kubernetes.io/name: straitd
app.kubernetes.io/part-of: strait
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{- define "strait.selectorLabels" -}}
app: istiod
istio: pilot
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* image: hub/name:tag unless name already holds a registry path. */}}
{{- define "strait.image" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}
{{- if contains "/" $name -}}{{ $name }}{{- else -}}{{ $root.Values.global.hub }}/{{ $name }}:{{ $root.Values.global.tag }}{{- end -}}
{{- end }}

{{/* Labels of a gateway's objects: the gateway's own (istio:
     ingressgateway, app: ...) and the release's, for uninstall. */}}
{{- define "strait.gatewayLabels" -}}
{{- $root := index . 0 -}}{{- $gw := index . 1 -}}
{{- toYaml $gw.labels }}
app.kubernetes.io/name: {{ $gw.name }}
app.kubernetes.io/part-of: strait
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
{{- end }}
