{{/* Name of every object: fullnameOverride, else the release name. */}}
{{- define "kubesched.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubesched.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The leader-election Lease: leaderElection.resourceName, else the release name. */}}
{{- define "kubesched.leaseName" -}}
{{- .Values.leaderElection.resourceName | default (include "kubesched.fullname" .) -}}
{{- end -}}

{{/* KubeSchedulerConfiguration.leaderElection with the Lease in the release namespace. */}}
{{- define "kubesched.leaderElection" -}}
{{- $le := omit .Values.leaderElection "resourceName" "resourceNamespace" -}}
{{- toYaml (merge (dict "resourceName" (include "kubesched.leaseName" .) "resourceNamespace" .Release.Namespace) $le) -}}
{{- end -}}

{{/* Values a user gets wrong, refused with what to change (helm prints the message). */}}
{{- define "kubesched.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.leaderElect) -}}
{{- fail (printf "replicas: %d needs leaderElection.leaderElect: true (without a leader every replica binds the same pods)" (int .Values.replicas)) -}}
{{- end -}}
{{- if not .Values.profiles -}}
{{- fail "profiles: at least one profile is needed (e.g. - schedulerName: kubesched)" -}}
{{- end -}}
{{- if .Values.extender.enabled -}}
{{- $names := list -}}
{{- range .Values.profiles -}}{{- $names = append $names .schedulerName -}}{{- end -}}
{{- if not (has .Values.extender.profile $names) -}}
{{- fail (printf "extender.profile: %q is not a schedulerName of profiles (%s)" .Values.extender.profile (join ", " $names)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kubesched.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: ["ALL"]}
{{- end -}}

{{- define "kubesched.podPlacement" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
