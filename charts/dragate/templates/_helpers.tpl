{{/* Names ------------------------------------------------------------------------------ */}}

{{- define "dragate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dragate.fullname" -}}
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

{{- define "dragate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dragate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dragate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dragate.labels" -}}
helm.sh/chart: {{ include "dragate.chart" . }}
{{ include "dragate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dragate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "dragate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dragate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The user the apiserver sees for the webhook's own API calls (managed templates). */}}
{{- define "dragate.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "dragate.serviceAccountName" . }}
{{- end }}

{{/* The controller role: its own name, pods, ServiceAccount ------------------------------ */}}

{{- define "dragate.controllerFullname" -}}
{{- printf "%s-controller" (include "dragate.fullname" . | trunc 52 | trimSuffix "-") }}
{{- end }}

{{/* Not the webhook's selector labels: the webhook Deployment selects name + instance, so
     the controller pods carry another name and neither Deployment ever counts the other's. */}}
{{- define "dragate.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-controller" (include "dragate.name" . | trunc 52 | trimSuffix "-") }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dragate.controllerLabels" -}}
helm.sh/chart: {{ include "dragate.chart" . }}
{{ include "dragate.controllerSelectorLabels" . }}
app.kubernetes.io/component: controller
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dragate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "dragate.controllerServiceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dragate.controllerFullname" .) .Values.serviceAccount.controllerName }}
{{- else }}
{{- required "serviceAccount.controllerName is required when serviceAccount.create=false" .Values.serviceAccount.controllerName }}
{{- end }}
{{- end }}

{{- define "dragate.controllerServiceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "dragate.controllerServiceAccountName" . }}
{{- end }}

{{/* "true" when the controller runs in its own Deployment; offline (serve.inCluster=false)
     the one webhook pod runs both roles in one process. */}}
{{- define "dragate.controllerDeployed" -}}
{{- if and .Values.deployment.enabled .Values.serve.inCluster }}true{{ end }}
{{- end }}

{{- define "dragate.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{- define "dragate.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "dragate.fullname" .)) .Values.certs.secretName }}
{{- end }}

{{- define "dragate.policiesConfigMapName" -}}
{{- default (printf "%s-policies" (include "dragate.fullname" .)) .Values.policies.existingConfigMap }}
{{- end }}

{{/* Certificate Secret and Certificate names: cert-manager's inject-ca-from points here. */}}
{{- define "dragate.servingCertificateName" -}}
{{- printf "%s-serving" (include "dragate.fullname" .) }}
{{- end }}

{{/* DNS names the apiserver (and Prometheus) use for the Service. */}}
{{- define "dragate.serviceDNSNames" -}}
{{- $svc := include "dragate.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- toJson (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) }}
{{- end }}

{{/* Paths inside the pod ---------------------------------------------------------------- */}}

{{- define "dragate.tlsDir" -}}/etc/dragate/tls{{- end }}
{{- define "dragate.policiesMountPath" -}}/etc/dragate/policies{{- end }}
{{- define "dragate.gitRoot" -}}/etc/dragate/git{{- end }}

{{/*
The directory `dragate serve --policies` reads.
ConfigMap volumes are laid out by the kubelet's atomic writer: the files live in a hidden
timestamped directory (..2026_01_01_00_00_00.123), `..data` is a symlink to it, and each key is
a symlink through `..data`. Pointing dragate at `..data` reads every file exactly once (the
loader searches directories recursively and would otherwise see each policy twice), and an
update swaps `..data` in one rename, which the hot-reload poller sees as a new file set.
With git-sync the `current` symlink plays the same role.
*/}}
{{- define "dragate.policiesDir" -}}
{{- if .Values.policies.gitSync.enabled }}
{{- printf "%s/current/%s" (include "dragate.gitRoot" .) (trimAll "/" .Values.policies.gitSync.subPath) | trimSuffix "/" }}
{{- else }}
{{- printf "%s/..data" (include "dragate.policiesMountPath" .) }}
{{- end }}
{{- end }}

{{- define "dragate.terminationGracePeriodSeconds" -}}
{{- $floor := add .Values.deployment.preStopSleepSeconds .Values.serve.gracefulTimeoutSeconds }}
{{- if kindIs "invalid" .Values.deployment.terminationGracePeriodSeconds }}
{{- add $floor 10 }}
{{- else if le (int .Values.deployment.terminationGracePeriodSeconds) (int $floor) }}
{{- fail (printf "deployment.terminationGracePeriodSeconds (%v) must be larger than preStopSleepSeconds + serve.gracefulTimeoutSeconds (%v), or in-flight reviews are killed" .Values.deployment.terminationGracePeriodSeconds $floor) }}
{{- else }}
{{- .Values.deployment.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}

{{/* Mode checks, run from every template that depends on them ---------------------------- */}}

{{- define "dragate.validate" -}}
{{- if .Values.webhook.url }}
{{- if .Values.deployment.enabled }}
{{- fail "webhook.url (url mode: the webhook runs outside the cluster) needs deployment.enabled=false" }}
{{- end }}
{{- if not (hasPrefix "https://" .Values.webhook.url) }}
{{- fail "webhook.url must start with https:// (the apiserver calls webhooks over TLS)" }}
{{- end }}
{{- if not .Values.webhook.caBundle }}
{{- fail "webhook.caBundle (base64 PEM) is required with webhook.url" }}
{{- end }}
{{- else if not .Values.deployment.enabled }}
{{- fail "deployment.enabled=false needs webhook.url: something has to serve the webhook" }}
{{- end }}
{{- if and (eq .Values.certs.mode "secret") .Values.deployment.enabled (not .Values.webhook.caBundle) }}
{{- fail "certs.mode=secret needs webhook.caBundle (base64 PEM of the CA that signed certs.secretName)" }}
{{- end }}
{{- if and .Values.policies.gitSync.enabled (not .Values.policies.gitSync.repo) }}
{{- fail "policies.gitSync.repo is required when policies.gitSync.enabled=true" }}
{{- end }}
{{- include "dragate.validateCluster" . }}
{{- end }}

{{/* Combinations that install cleanly and then break: refused before anything is applied. */}}
{{- define "dragate.validateCluster" -}}
{{- $offline := and .Values.deployment.enabled (not .Values.serve.inCluster) }}
{{- if and $offline (gt (int .Values.webhook.replicas) 1) }}
{{- fail (printf "serve.inCluster=false with webhook.replicas=%v: each replica would keep its own quota ledger and admit a tenant's whole quota alone; set webhook.replicas=1 or serve.inCluster=true" (int .Values.webhook.replicas)) }}
{{- end }}
{{- if and .Values.rewritePolicy.keep $offline }}
{{- fail "rewritePolicy.keep=true needs serve.inCluster=true: the rewrite policy is kept through the Kubernetes API, and `dragate serve --keep-rewrite-policy` refuses to start without a cluster" }}
{{- end }}
{{- if and (ne .Values.policies.source "files") $offline }}
{{- fail (printf "policies.source=%s needs serve.inCluster=true: policy objects are read from the Kubernetes API" .Values.policies.source) }}
{{- end }}
{{- end }}

{{/*
Certificates for certs.mode=helm, computed once per render and shared by the Secret and both
webhook configurations (templates of one chart share the root context, so `set $` memoizes).
- an existing Secret is reused as is: upgrades never change the certificate or the CA;
- certs.helm.renew: a new serving cert signed by the kept CA (caBundle unchanged);
- certs.helm.rotateCA: a new CA and serving cert; the bundle holds the previous and the new
  CA, so the apiserver trusts both while the kubelet propagates the new Secret to the pods.
Keys are the `dragate certs` directory layout, so `dragate certs renew --dir` works on them.
*/}}
{{- define "dragate.helmCerts" -}}
{{- if not (hasKey $ "dragateHelmCerts") }}
{{- $name := include "dragate.tlsSecretName" . }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $name }}
{{- $data := dict }}
{{- if and $existing $existing.data }}{{- $data = $existing.data }}{{- end }}
{{- $dns := include "dragate.serviceDNSNames" . | fromJsonArray }}
{{- $cn := index $dns 2 }}
{{- $days := int .Values.certs.helm.days }}
{{- $caDays := int .Values.certs.helm.caDays }}
{{- $haveCA := and (hasKey $data "ca.crt") (hasKey $data "ca.key") }}
{{- $out := dict }}
{{- if and $haveCA (hasKey $data "tls.crt") (hasKey $data "tls.key") (not .Values.certs.helm.renew) (not .Values.certs.helm.rotateCA) }}
{{- range $key, $value := $data }}{{- $_ := set $out $key (b64dec $value) }}{{- end }}
{{- else if and $haveCA (not .Values.certs.helm.rotateCA) }}
{{- $ca := buildCustomCert (index $data "ca.crt") (index $data "ca.key") }}
{{- $leaf := genSignedCert $cn nil $dns $days $ca }}
{{- $bundle := b64dec (default (index $data "ca.crt") (index $data "ca-bundle.crt")) }}
{{- $out = dict "ca.crt" $ca.Cert "ca.key" $ca.Key "tls.crt" $leaf.Cert "tls.key" $leaf.Key "ca-bundle.crt" $bundle }}
{{- else }}
{{- $ca := genCA (printf "%s-ca" (include "dragate.fullname" .)) $caDays }}
{{- $leaf := genSignedCert $cn nil $dns $days $ca }}
{{- $bundle := $ca.Cert }}
{{- if $haveCA }}
{{- $bundle = printf "%s\n%s" (trim (b64dec (index $data "ca.crt"))) (trim $ca.Cert) }}
{{- end }}
{{- $out = dict "ca.crt" $ca.Cert "ca.key" $ca.Key "tls.crt" $leaf.Cert "tls.key" $leaf.Key "ca-bundle.crt" $bundle }}
{{- end }}
{{- if not (hasKey $out "ca-bundle.crt") }}{{- $_ := set $out "ca-bundle.crt" (get $out "ca.crt") }}{{- end }}
{{- $_ := set $ "dragateHelmCerts" $out }}
{{- end }}
{{- toJson (get $ "dragateHelmCerts") }}
{{- end }}

{{/* caBundle for the webhook configurations; empty under cert-manager (cainjector fills it). */}}
{{- define "dragate.caBundle" -}}
{{- if or .Values.webhook.url (eq .Values.certs.mode "secret") }}
{{- .Values.webhook.caBundle }}
{{- else if eq .Values.certs.mode "helm" }}
{{- $certs := include "dragate.helmCerts" . | fromJson }}
{{- get $certs "ca-bundle.crt" | b64enc }}
{{- end }}
{{- end }}

{{/* clientConfig for one webhook path: url mode or the Service. */}}
{{- define "dragate.clientConfig" -}}
{{- $root := index . 0 }}
{{- $path := index . 1 }}
{{- $bundle := include "dragate.caBundle" $root }}
{{- if $root.Values.webhook.url }}
url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhook.url) $path | quote }}
{{- else }}
service:
  name: {{ include "dragate.fullname" $root }}
  namespace: {{ $root.Release.Namespace }}
  path: {{ $path }}
  port: {{ $root.Values.service.port }}
{{- end }}
{{- if $bundle }}
caBundle: {{ $bundle }}
{{- end }}
{{- end }}

{{/* namespaceSelector: the immutable metadata.name label, so no one can opt out by relabeling. */}}
{{- define "dragate.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- range (.Values.webhook.excludeNamespaces | concat (list .Release.Namespace) | uniq) }}
        - {{ . | quote }}
        {{- end }}
{{- end }}

{{- define "dragate.podCreateRules" -}}
- operations: [CREATE]
  apiGroups: [""]
  apiVersions: [v1]
  resources: [pods]
  scope: Namespaced
{{- end }}

{{/* Pods by the label the rewrite sets (webhook/rewrite/shapes.py REWRITTEN_LABEL); the
     argument is the operator: Exists for rewritten Pods, DoesNotExist for all others. */}}
{{- define "dragate.rewrittenSelector" -}}
objectSelector:
  matchExpressions:
    - {key: dragate.io/rewritten, operator: {{ . }}}
{{- end }}

{{/* CEL building blocks -------------------------------------------------------------------- */}}

{{/* A CEL list literal of strings: ['a', 'b']. Values are checked by the schema to hold no quote. */}}
{{- define "dragate.celList" -}}
[{{- range $i, $v := . }}{{ if $i }}, {{ end }}'{{ $v }}'{{- end }}]
{{- end }}

{{/* true when container `c` asks for a resource with one of the GPU prefixes. */}}
{{- define "dragate.celGpuContainer" -}}
{{- $prefixes := include "dragate.celList" .Values.webhook.gpuResourcePrefixes -}}
(has(c.resources) && ((has(c.resources.limits) && c.resources.limits.exists(r, {{ $prefixes }}.exists(p, r.startsWith(p)))) || (has(c.resources.requests) && c.resources.requests.exists(r, {{ $prefixes }}.exists(p, r.startsWith(p))))))
{{- end }}

{{/* true when some pod template of a Job, JobSet or LeaderWorkerSet (`request.kind`) names
claims or asks for a resource with one of the GPU prefixes; each kind's templates are read
only for that kind, so no expression meets a field its kind lacks. */}}
{{- define "dragate.celGpuWorkload" -}}
request.kind.kind == 'PodGroup' ? has(object.spec.schedulingPolicy.gang) :
((request.kind.kind == 'Job' ? [object.spec.template.spec] :
request.kind.kind == 'JobSet' ? object.spec.replicatedJobs.map(j, j.template.spec.template.spec) :
[object.spec.leaderWorkerTemplate.workerTemplate.spec] + (has(object.spec.leaderWorkerTemplate.leaderTemplate) ? [object.spec.leaderWorkerTemplate.leaderTemplate.spec] : [])).exists(s,
(has(s.resourceClaims) && size(s.resourceClaims) > 0) ||
s.containers.exists(c, {{ include "dragate.celGpuContainer" . }}) ||
(has(s.initContainers) && s.initContainers.exists(c, {{ include "dragate.celGpuContainer" . }}))))
{{- end }}

{{/* Every request but a PodGroup's UPDATE; that one only when its gang's minCount changes. */}}
{{- define "dragate.celPodGroupScaled" -}}
request.kind.kind != 'PodGroup' || request.operation != 'UPDATE' ||
!has(oldObject.spec.schedulingPolicy.gang) || !has(object.spec.schedulingPolicy.gang) ||
oldObject.spec.schedulingPolicy.gang.minCount != object.spec.schedulingPolicy.gang.minCount
{{- end }}

{{- define "dragate.celLegacyGpuPod" -}}
object.spec.containers.exists(c, {{ include "dragate.celGpuContainer" . }}) ||
(has(object.spec.initContainers) && object.spec.initContainers.exists(c, {{ include "dragate.celGpuContainer" . }}))
{{- end }}

{{/* Control-plane bookkeeping UPDATEs (finalizers, owner references) and dragate's own writes. */}}
{{- define "dragate.matchNotControlPlane" -}}
- name: not-control-plane-update
  expression: >-
    request.operation != 'UPDATE' ||
    !(request.userInfo.username in {{ include "dragate.celList" .Values.webhook.skipUpdatesFromUsers }} ||
    (has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in {{ include "dragate.celList" .Values.webhook.skipUpdatesFromGroups }})))
- name: not-dragate-itself
  expression: "!(request.userInfo.username in {{ include "dragate.celList" (include "dragate.ownUsers" . | fromJsonArray) }})"
{{- end }}

{{/* dragate's own users: the webhook's (or webhook.ownUsername) and the controller's, whose
     template keeper re-creates managed templates. */}}
{{- define "dragate.ownUsers" -}}
{{- toJson (list (.Values.webhook.ownUsername | default (include "dragate.serviceAccountUser" .)) (include "dragate.controllerServiceAccountUser" .) | uniq) }}
{{- end }}

{{/* Restricted Pod Security Standard, plus a read-only root filesystem. */}}
{{- define "dragate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* git-sync (v4) container: list root name oneTime. */}}
{{- define "dragate.gitSyncContainer" -}}
{{- $root := index . 0 }}
{{- $gs := $root.Values.policies.gitSync }}
- name: {{ index . 1 }}
  image: {{ printf "%s:%s" $gs.image.repository $gs.image.tag | quote }}
  imagePullPolicy: {{ $gs.image.pullPolicy }}
  args:
    - --repo={{ $gs.repo }}
    - --ref={{ $gs.ref }}
    - --root={{ include "dragate.gitRoot" $root }}
    - --link=current
    - --depth=1
    - --period={{ $gs.periodSeconds }}s
    {{- if index . 2 }}
    - --one-time
    {{- end }}
    {{- range $gs.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  env:
    - name: HOME
      value: /tmp
  resources:
    {{- toYaml $gs.resources | nindent 4 }}
  securityContext:
    {{- include "dragate.containerSecurityContext" $root | nindent 4 }}
  volumeMounts:
    - name: git
      mountPath: {{ include "dragate.gitRoot" $root }}
    - name: tmp
      mountPath: /tmp
    {{- if $gs.credentialsSecret }}
    - name: git-secret
      mountPath: /etc/git-secret
      readOnly: true
    {{- end }}
{{- end }}
