{{/* Names, labels and small derived values shared by the templates. */}}

{{- define "tugboat.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name of every object: the release name, with the chart name unless the
     release name already contains it. */}}
{{- define "tugboat.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tugboat.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tugboat.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tugboat.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tugboat.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: ingress-controller
{{- end }}

{{- define "tugboat.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tugboat.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tugboat.electionId" -}}
{{- default (printf "%s-leader" (include "tugboat.fullname" .)) .Values.controller.electionId }}
{{- end }}

{{- define "tugboat.controllerImage" -}}
{{- printf "%s:%s" .Values.controller.image.repository (default .Chart.AppVersion .Values.controller.image.tag) }}
{{- end }}

{{/* The master socket, shared by haproxy's -S and the controller's --master-socket. */}}
{{- define "tugboat.masterSocket" -}}
/var/run/haproxy/master.sock
{{- end }}

{{/* Mode of the master socket. haproxy creates it as its own user; with the default
     identical uids, 600 is enough. A root haproxy makes it group-accessible instead: the
     socket's group is the pod's fsGroup (the emptyDir is setgid), which the controller
     holds. */}}
{{- define "tugboat.masterSocketMode" -}}
{{- if eq .Values.haproxy.lowPorts "root" }}660{{ else }}600{{ end }}
{{- end }}

{{/* The ConfigMap of the TCP services (tcpServices, --tcp-services-configmap). */}}
{{- define "tugboat.tcpServicesConfigMap" -}}
{{- printf "%s-tcp-services" (include "tugboat.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The user's ports beyond HTTP and HTTPS, as a YAML list of {name, port, bind}: the
     TCP services' ports, then the Gateway listener ports. haproxy binds a user's port P
     at P + 10000 (crates/tugboat-model/src/ports.rs), so that it needs no privilege;
     the Service and the hostPorts map P to it. */}}
{{- define "tugboat.userPorts" -}}
{{- $ports := list }}
{{- range $port, $target := .Values.tcpServices }}
{{- $ports = append $ports (dict "name" (printf "tcp-%s" $port) "port" (int $port) "bind" (add (int $port) 10000)) }}
{{- end }}
{{- if .Values.gatewayApi.enabled }}
{{- range .Values.gatewayApi.listenerPorts }}
{{- $ports = append $ports (dict "name" (printf "listener-%d" (int .)) "port" (int .) "bind" (add (int .) 10000)) }}
{{- end }}
{{- end }}
{{- toYaml $ports }}
{{- end }}

{{/* Fails the render when ports below 1024 are asked for without a way to bind them,
     when two ports collide, and on settings of the node's network that cannot work. */}}
{{- define "tugboat.checkPorts" -}}
{{- $h := .Values.haproxy }}
{{- $c := .Values.controller }}
{{- $low := or (lt (int $h.httpPort) 1024) (lt (int $h.httpsPort) 1024) }}
{{- if and $low (eq $h.lowPorts "none") }}
{{- fail "haproxy.httpPort/httpsPort below 1024 need haproxy.lowPorts set to sysctl, node, capability or root (see the chart README, \"Ports 80 and 443\")" }}
{{- end }}
{{- if and (or $c.hostNetwork $c.hostPort.enabled) (ne $c.kind "DaemonSet") }}
{{- fail "controller.hostNetwork and controller.hostPort.enabled need controller.kind DaemonSet (one pod per node: the pods of a Deployment would compete for the node's ports)" }}
{{- end }}
{{- if and $c.hostNetwork $c.hostPort.enabled }}
{{- fail "controller.hostPort.enabled does not apply with controller.hostNetwork: the node's ports are then haproxy.httpPort/httpsPort themselves; enable one of them" }}
{{- end }}
{{- if and $c.hostNetwork (eq $h.lowPorts "sysctl") }}
{{- fail "haproxy.lowPorts=sysctl does not work with controller.hostNetwork (a pod sysctl would change the node's network): set net.ipv4.ip_unprivileged_port_start on the node and use haproxy.lowPorts=node" }}
{{- end }}
{{- if and (eq $h.lowPorts "node") (not $c.hostNetwork) }}
{{- fail "haproxy.lowPorts=node needs controller.hostNetwork: it relies on the node's net.ipv4.ip_unprivileged_port_start, which a pod's own network does not inherit" }}
{{- end }}
{{- if and .Values.gatewayApi.listenerPorts (not .Values.gatewayApi.enabled) }}
{{- fail "gatewayApi.listenerPorts needs gatewayApi.enabled" }}
{{- end }}
{{- $taken := dict (toString $h.httpPort) "haproxy.httpPort" (toString $h.httpsPort) "haproxy.httpsPort" (toString $c.statsPort) "controller.statsPort" (toString $c.port) "controller.port" }}
{{- $outside := dict (toString .Values.service.httpPort) "service.httpPort" (toString .Values.service.httpsPort) "service.httpsPort" }}
{{- if $c.hostPort.enabled }}
{{- $_ := set $outside (toString $c.hostPort.ports.http) "controller.hostPort.ports.http" }}
{{- $_ := set $outside (toString $c.hostPort.ports.https) "controller.hostPort.ports.https" }}
{{- end }}
{{- range (include "tugboat.userPorts" . | fromYamlArray) }}
{{- $port := int .port }}
{{- $bind := int .bind }}
{{- $what := ternary (printf "tcpServices \"%d\"" $port) (printf "gatewayApi.listenerPorts %d" $port) (hasPrefix "tcp-" .name) }}
{{- if or (lt $port 1) (gt $port 55535) }}
{{- fail (printf "%s: the port must be between 1 and 55535 (haproxy binds port + 10000)" $what) }}
{{- end }}
{{- if hasKey $outside (toString $port) }}
{{- fail (printf "%s: port %d is already %s" $what $port (get $outside (toString $port))) }}
{{- end }}
{{- if hasKey $taken (toString $bind) }}
{{- fail (printf "%s: haproxy binds it at %d, which is already %s" $what $bind (get $taken (toString $bind))) }}
{{- end }}
{{- $_ := set $outside (toString $port) $what }}
{{- $_ := set $taken (toString $bind) $what }}
{{- end }}
{{- if and (eq .Values.haproxy.lowPorts "capability") (eq .Values.haproxy.image.repository "haproxy") }}
{{- fail "haproxy.lowPorts=capability needs a haproxy image whose binary has cap_net_bind_service (setcap); the official image \"haproxy\" has none: set haproxy.image.repository to your build" }}
{{- end }}
{{- end }}

{{/* The security context of the controller and the init container (and of haproxy in
     the default lowPorts mode): no root, no capabilities, nothing writable but the
     mounted volumes. */}}
{{- define "tugboat.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* haproxy's security context, by haproxy.lowPorts:
     none, sysctl  the same as the controller's;
     capability    NET_BIND_SERVICE in the bounding set and privilege escalation allowed,
                   so that the file capability of a setcap'ed haproxy binary takes effect
                   at exec (no_new_privs would ignore it);
     root          uid 0 with NET_BIND_SERVICE, and DAC_READ_SEARCH to read the private
                   keys the controller writes with mode 600 as uid 99. */}}
{{- define "tugboat.haproxySecurityContext" -}}
{{- $mode := .Values.haproxy.lowPorts }}
{{- if eq $mode "root" }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: false
runAsUser: 0
capabilities:
  drop: ["ALL"]
  add: ["NET_BIND_SERVICE", "DAC_READ_SEARCH"]
seccompProfile:
  type: RuntimeDefault
{{- else if eq $mode "capability" }}
allowPrivilegeEscalation: true
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
  add: ["NET_BIND_SERVICE"]
seccompProfile:
  type: RuntimeDefault
{{- else }}
{{- include "tugboat.containerSecurityContext" . }}
{{- end }}
{{- end }}

{{/* RBAC rules, shared by the ClusterRole and the per-namespace Roles (rbac.yaml). */}}
{{- define "tugboat.namespacedRules" -}}
- apiGroups: [""]
  resources: ["services", "secrets", "configmaps"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses/status"]
  verbs: ["update", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- if .Values.gatewayApi.enabled }}
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gateways", "httproutes", "tlsroutes", "tcproutes", "referencegrants"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gateways/status", "httproutes/status", "tlsroutes/status", "tcproutes/status"]
  verbs: ["update", "patch"]
{{- end }}
{{- end }}
{{- define "tugboat.ingressClassRules" -}}
- apiGroups: ["networking.k8s.io"]
  resources: ["ingressclasses"]
  verbs: ["get", "list", "watch"]
{{- if .Values.gatewayApi.enabled }}
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gatewayclasses"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["gatewayclasses/status"]
  verbs: ["update", "patch"]
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get", "list", "watch"]
{{- end }}
{{- end }}
