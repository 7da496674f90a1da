{{/* Names and labels shared by every object of the chart. */}}
{{- define "brp.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "brp.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component (publicatie, mutatielevering, migrate). */}}
{{- define "brp.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "brp.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The environment both commands share: where the database and the broker are, and the
     secrets as files (never as environment values). */}}
{{- define "brp.env" -}}
- name: BRP_DATABASE_URL
{{- if .Values.database.caSecret }}
  value: {{ printf "%s%ssslrootcert=/etc/brp/database-ca/ca.crt" .Values.database.url (ternary "&" "?" (contains "?" .Values.database.url)) | quote }}
{{- else }}
  value: {{ .Values.database.url | quote }}
{{- end }}
- name: BRP_DATABASE_PASSWORD_FILE
  value: /etc/brp/database/password
- name: BRP_STOMP_ADDR
  value: {{ .Values.broker.addr | quote }}
- name: BRP_STOMP_LOGIN
  value: {{ .Values.broker.login | quote }}
- name: BRP_STOMP_PASSCODE_FILE
  value: /etc/brp/broker/passcode
{{- if .Values.broker.tls.enabled }}
- name: BRP_STOMP_TLS
  value: "true"
{{- if .Values.broker.tls.secret }}
- name: BRP_STOMP_TLS_CA
  value: /etc/brp/broker-tls/ca.crt
{{- if .Values.broker.tls.clientCertificate }}
- name: BRP_STOMP_TLS_CERT
  value: /etc/brp/broker-tls/tls.crt
- name: BRP_STOMP_TLS_KEY
  value: /etc/brp/broker-tls/tls.key
{{- end }}
{{- end }}
{{- end }}
{{- range $k, $v := .Values.env }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{- define "brp.volumeMounts" -}}
- name: database-password
  mountPath: /etc/brp/database
  readOnly: true
- name: broker-passcode
  mountPath: /etc/brp/broker
  readOnly: true
{{- if .Values.database.caSecret }}
- name: database-ca
  mountPath: /etc/brp/database-ca
  readOnly: true
{{- end }}
{{- if and .Values.broker.tls.enabled .Values.broker.tls.secret }}
- name: broker-tls
  mountPath: /etc/brp/broker-tls
  readOnly: true
{{- end }}
- name: tmp
  mountPath: /tmp
{{- end -}}

{{- define "brp.volumes" -}}
- name: database-password
  secret:
    secretName: {{ .Values.database.passwordSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ .Values.database.passwordSecret.key }}
        path: password
- name: broker-passcode
  secret:
    secretName: {{ .Values.broker.passcodeSecret.name }}
    defaultMode: 0440
    items:
      - key: {{ .Values.broker.passcodeSecret.key }}
        path: passcode
{{- if .Values.database.caSecret }}
- name: database-ca
  secret:
    secretName: {{ .Values.database.caSecret }}
    defaultMode: 0440
{{- end }}
{{- if and .Values.broker.tls.enabled .Values.broker.tls.secret }}
- name: broker-tls
  secret:
    secretName: {{ .Values.broker.tls.secret }}
    defaultMode: 0440
{{- end }}
- name: tmp
  emptyDir:
    sizeLimit: 16Mi
{{- end -}}

{{/* Probes: /healthz says the process runs (liveness and startup never depend on the database
     or the broker, which are waited for); /readyz says it reaches both (a consumer: and is
     subscribed). */}}
{{- define "brp.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 5
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
{{- end -}}

{{- define "brp.pod" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  {{- include "brp.volumes" .root | nindent 2 }}
{{- end -}}
