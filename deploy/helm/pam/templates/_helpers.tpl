{{- define "pam.fullname" -}}
{{- printf "%s-pamd" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pam.labels" -}}
app.kubernetes.io/name: pamd
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "pam.selector" -}}
app.kubernetes.io/name: pamd
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pam.tlsSecret" -}}
{{- if .Values.tls.certManager.enabled -}}
{{ include "pam.fullname" . }}-tls
{{- else -}}
{{ .Values.tls.secretName }}
{{- end -}}
{{- end -}}
