//! The Helm chart of `cargo xtask deploy` (`chart/kubesched/` of the output folder).
//!
//! The chart installs the objects of `kubesched.yaml`, with the options of the rendering as
//! its default values. Its templates are written here from the same pieces the manifests
//! are built from: the RBAC rules (the kube backend's table and the plugins' declarations),
//! the probes, ports, security contexts and mounts ([`crate::render`]'s functions, emitted
//! as YAML and indented into place), and the constants. What values change (names, image,
//! replicas, scheduling constraints, plugins) is templated with a small subset of Go
//! templates and Helm's functions: `include`, `toYaml`, `nindent`, `quote`, `default`,
//! `int`, `printf`, `replace`, `trunc`, `trimSuffix`, `sha256sum`, `fail`. xtask's tests
//! render the chart with a Go-template engine and those functions and compare the objects
//! with the manifests' (xtask/tests/chart.rs), so chart and manifests cannot drift.

use crate::rbac::{self, Rule};
use crate::render::{self, DeployOptions, RenderedFile};
use crate::yaml::{self, Yaml};

/// The chart's folder below the output folder.
pub const DIR: &str = "chart/kubesched";
/// The chart's name.
pub const NAME: &str = "kubesched";
/// The plugins' CustomResourceDefinitions, installed by Helm before the templates.
pub const CRDS_FILE: &str = "chart/kubesched/crds/plugins.yaml";

/// What the chart is rendered from besides the options: the manifests' own pieces.
#[derive(Debug)]
pub struct ChartInput<'a> {
    /// The rendering's options: the chart's default values.
    pub opts: &'a DeployOptions,
    /// The ClusterRole's rules.
    pub cluster_rules: Yaml,
    /// The table rows of the lease namespace.
    pub lease_rules: Vec<Rule>,
    /// The rules of the authentication ConfigMap's namespace (an empty list: none).
    pub auth_rules: Yaml,
    /// The profile's `plugins` the options choose (None: the compiled-in defaults).
    pub profile_plugins: Option<Yaml>,
    /// The plugins' CustomResourceDefinitions.
    pub crds: &'a [Yaml],
}

/// Stands for the lease's name in the emitted lease rules until it is templated.
const LEASE_NAME_MARK: &str = "KUBESCHED-LEASE-NAME";

/// The chart's files, in a fixed order.
pub fn files(input: &ChartInput<'_>) -> Vec<RenderedFile> {
    let mut files = vec![
        RenderedFile {
            path: "chart/kubesched/Chart.yaml",
            contents: chart_yaml(),
        },
        RenderedFile {
            path: "chart/kubesched/values.yaml",
            contents: values_yaml(input),
        },
        RenderedFile {
            path: "chart/kubesched/README.md",
            contents: README.to_string(),
        },
        RenderedFile {
            path: "chart/kubesched/templates/NOTES.txt",
            contents: fill(NOTES, &[("port", render::SECURE_PORT.to_string())]),
        },
        RenderedFile {
            path: "chart/kubesched/templates/_helpers.tpl",
            contents: fill(
                HELPERS,
                &[
                    ("config_api", render::CONFIG_API_VERSION.to_string()),
                    ("config_kind", render::CONFIG_KIND.to_string()),
                ],
            ),
        },
        RenderedFile {
            path: "chart/kubesched/templates/serviceaccount.yaml",
            contents: format!("{HEADER}{SERVICE_ACCOUNT}"),
        },
        RenderedFile {
            path: "chart/kubesched/templates/rbac.yaml",
            contents: rbac_template(input),
        },
        RenderedFile {
            path: "chart/kubesched/templates/configmap.yaml",
            contents: fill(
                &format!("{HEADER}{CONFIG_MAP}"),
                &[("config_key", render::CONFIG_KEY.to_string())],
            ),
        },
        RenderedFile {
            path: "chart/kubesched/templates/deployment.yaml",
            contents: deployment_template(),
        },
        RenderedFile {
            path: "chart/kubesched/templates/service.yaml",
            contents: fill(
                &format!("{HEADER}{SERVICE}"),
                &[
                    ("port_name", render::SECURE_PORT_NAME.to_string()),
                    ("port", render::SECURE_PORT.to_string()),
                ],
            ),
        },
        RenderedFile {
            path: "chart/kubesched/templates/poddisruptionbudget.yaml",
            contents: fill(
                &format!("{HEADER}{PDB}"),
                &[("min_available", render::PDB_MIN_AVAILABLE.to_string())],
            ),
        },
        RenderedFile {
            path: "chart/kubesched/templates/servicemonitor.yaml",
            contents: service_monitor_template(),
        },
    ];
    if !input.crds.is_empty() {
        files.push(RenderedFile {
            path: CRDS_FILE,
            contents: format!(
                "# The chosen plugins' CustomResourceDefinitions (Helm installs crds/ before the templates).\n\
                 # Rendered by `{}`.\n---\n{}",
                input.opts.command_line(),
                yaml::documents(input.crds)
            ),
        });
    }
    files
}

/// The first lines of every template.
/// A template comment, so that a template whose condition is false renders nothing at all.
const HEADER: &str = "{{/* Rendered by `cargo xtask deploy` (xtask/src/chart.rs): re-render rather than edit. */}}\n";

/// `text` with every `@@key@@` replaced by its value. A placeholder alone on its line takes
/// a multi-line value indented to the placeholder's column.
fn fill(text: &str, values: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let column = line.len() - trimmed.len();
        let alone = values
            .iter()
            .find(|(key, _)| trimmed.trim_end() == format!("@@{key}@@"));
        match alone {
            Some((_, value)) if value.contains('\n') => {
                for value_line in value.trim_end_matches('\n').lines() {
                    out.push_str(&" ".repeat(column));
                    out.push_str(value_line);
                    out.push('\n');
                }
            }
            _ => {
                let mut line = line.to_string();
                for (key, value) in values {
                    line = line.replace(&format!("@@{key}@@"), value);
                }
                out.push_str(&line);
            }
        }
    }
    out
}

/// A value as block YAML (several lines, no trailing newline), for [`fill`].
fn block(value: &Yaml) -> String {
    value.to_document().trim_end_matches('\n').to_string()
}

fn chart_yaml() -> String {
    let version = env!("CARGO_PKG_VERSION");
    // appVersion quoted, as Helm advises: a version such as 1.10 would otherwise be a number.
    format!(
        "# Rendered by `cargo xtask deploy` (xtask/src/chart.rs): re-render rather than edit.\n\
         apiVersion: v2\n\
         name: {NAME}\n\
         description: kubesched, the Kubernetes scheduler in Rust that reproduces kube-scheduler v1.37, as a second scheduler\n\
         type: application\n\
         version: {version}\n\
         appVersion: \"{version}\"\n\
         keywords:\n\
         - scheduler\n\
         - kube-scheduler\n",
    )
}

/// `repository`, `tag` and `digest` of an image reference (the tag is empty with a digest).
///
/// ```
/// use xtask::chart::split_image;
/// let parts = |r: &str, t: &str, d: &str| (r.to_string(), t.to_string(), d.to_string());
/// assert_eq!(split_image("reg:5000/k:slim"), parts("reg:5000/k", "slim", ""));
/// assert_eq!(split_image("reg:5000/k"), parts("reg:5000/k", "latest", ""));
/// assert_eq!(split_image("k@sha256:ab"), parts("k", "", "sha256:ab"));
/// ```
pub fn split_image(image: &str) -> (String, String, String) {
    if let Some((repo, digest)) = image.split_once('@') {
        return (repo.to_string(), String::new(), digest.to_string());
    }
    // A colon after the last slash separates the tag (one before it is a registry's port).
    let last_slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[last_slash..].rfind(':') {
        Some(i) => (
            image[..last_slash + i].to_string(),
            image[last_slash + i + 1..].to_string(),
            String::new(),
        ),
        // No tag means `latest` to the container runtime; the chart spells it out, since
        // an empty tag there stands for the chart's appVersion.
        None => (image.to_string(), "latest".to_string(), String::new()),
    }
}

fn values_yaml(input: &ChartInput<'_>) -> String {
    let opts = input.opts;
    let (repository, tag, digest) = split_image(&opts.image);
    let plugins = input.profile_plugins.as_ref().map_or_else(
        || "plugins: {}".to_string(),
        |p| format!("plugins:\n{}", indent(&block(p), 2)),
    );
    let s = |v: &str| yaml::scalar(v);
    format!(
        "# Default values of the kubesched chart: the options of `{cmd}`.\n\
         # Rendered by `cargo xtask deploy` (xtask/src/chart.rs): re-render rather than edit.\n\
         \n\
         # spec.schedulerName of the pods this scheduler takes; it also names every object.\n\
         schedulerName: {name}\n\
         \n\
         image:\n\
         \x20 repository: {repository}\n\
         \x20 # Empty: the chart's appVersion.\n\
         \x20 tag: {tag}\n\
         \x20 # An image digest (sha256:...), used instead of the tag when set.\n\
         \x20 digest: {digest}\n\
         \x20 pullPolicy: IfNotPresent\n\
         imagePullSecrets: []\n\
         \n\
         # More than one replica needs leaderElect, and adds a PodDisruptionBudget and (unless\n\
         # affinity is set) pod anti-affinity on kubernetes.io/hostname.\n\
         replicaCount: {replicas}\n\
         leaderElect: {leader_elect}\n\
         leaderElection:\n\
         \x20 # The Lease, which the leader-election Role is limited to. Empty: schedulerName.\n\
         \x20 resourceName: \"\"\n\
         \x20 # Empty: the release's namespace.\n\
         \x20 resourceNamespace: \"\"\n\
         \n\
         priorityClassName: system-cluster-critical\n\
         resources:\n\
         {resources}\n\
         nodeSelector: {{}}\n\
         # Empty: preferred anti-affinity on kubernetes.io/hostname when replicaCount > 1.\n\
         affinity: {{}}\n\
         tolerations: []\n\
         \n\
         # The profile's plugins, per extension point (multiPoint, preFilter, filter, score, ...),\n\
         # each with `enabled` and `disabled` lists, as in KubeSchedulerConfiguration:\n\
         #   plugins:\n\
         #     multiPoint:\n\
         #       enabled: [{{name: Coscheduling}}]\n\
         #       disabled: [{{name: PrioritySort}}]\n\
         {plugins}\n\
         # The profile's pluginConfig: [{{name: NodeResourcesFit, args: {{...}}}}].\n\
         pluginConfig: []\n\
         # More arguments of `kubesched run` (kube-scheduler's flags: --v=2, --kube-api-qps=100, ...).\n\
         extraArgs: []\n\
         \n\
         # A prometheus-operator ServiceMonitor for the metrics Service (HTTPS on {port}).\n\
         serviceMonitor:\n\
         \x20 enabled: {service_monitor}\n\
         \x20 interval: {interval}\n\
         \x20 # Labels your Prometheus selects ServiceMonitors by (e.g. release: prometheus).\n\
         \x20 labels: {{}}\n",
        cmd = opts.command_line(),
        name = s(&opts.scheduler_name),
        repository = s(&repository),
        tag = s(&tag),
        digest = s(&digest),
        replicas = opts.replicas,
        leader_elect = opts.leader_election,
        resources = indent(&block(&render::default_resources()), 2),
        port = render::SECURE_PORT,
        service_monitor = opts.service_monitor,
        interval = s(render::SCRAPE_INTERVAL),
    )
}

/// Every line of `text` indented by `n` spaces.
fn indent(text: &str, n: usize) -> String {
    text.lines()
        .map(|l| format!("{}{l}", " ".repeat(n)))
        .collect::<Vec<_>>()
        .join("\n")
}

const HELPERS: &str = r#"{{/*
Helpers of the kubesched chart. Rendered by `cargo xtask deploy` (xtask/src/chart.rs): re-render rather than edit.
*/}}

{{/* The labels of every object, and the selector of the scheduler's pods. */}}
{{- define "kubesched.labels" -}}
app.kubernetes.io/name: kubesched
app.kubernetes.io/instance: {{ .Values.schedulerName | quote }}
{{- end }}

{{- define "kubesched.image" -}}
{{ .Values.image.repository }}{{ if .Values.image.digest }}@{{ .Values.image.digest }}{{ else }}:{{ .Values.image.tag | default .Chart.AppVersion }}{{ end }}
{{- end }}

{{- define "kubesched.leaseName" -}}
{{ .Values.leaderElection.resourceName | default .Values.schedulerName }}
{{- end }}

{{- define "kubesched.leaseNamespace" -}}
{{ .Values.leaderElection.resourceNamespace | default .Release.Namespace }}
{{- end }}

{{/* A Service name is a DNS label: no dots, at most 63 characters. */}}
{{- define "kubesched.metricsServiceName" -}}
{{ printf "%s-metrics" .Values.schedulerName | replace "." "-" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The KubeSchedulerConfiguration; the Deployment's pods carry its checksum. */}}
{{- define "kubesched.config" -}}
apiVersion: @@config_api@@
kind: @@config_kind@@
leaderElection:
  leaderElect: {{ .Values.leaderElect }}
  resourceName: {{ include "kubesched.leaseName" . | quote }}
  resourceNamespace: {{ include "kubesched.leaseNamespace" . | quote }}
profiles:
- schedulerName: {{ .Values.schedulerName | quote }}
  {{- with .Values.plugins }}
  plugins:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.pluginConfig }}
  pluginConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
"#;

const SERVICE_ACCOUNT: &str = r#"apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ .Values.schedulerName | quote }}
  namespace: {{ .Release.Namespace | quote }}
  labels:
    {{- include "kubesched.labels" . | nindent 4 }}
"#;

const SUBJECTS: &str = r#"subjects:
- kind: ServiceAccount
  name: {{ .Values.schedulerName | quote }}
  namespace: {{ .Release.Namespace | quote }}
"#;

fn rbac_template(input: &ChartInput<'_>) -> String {
    let labels = "  labels:\n    {{- include \"kubesched.labels\" . | nindent 4 }}\n";
    let mut docs = vec![format!(
        "apiVersion: rbac.authorization.k8s.io/v1\n\
         kind: ClusterRole\n\
         metadata:\n\
         \x20 name: {{{{ .Values.schedulerName | quote }}}}\n\
         {labels}\
         rules:\n{rules}\n",
        rules = block(&input.cluster_rules),
    )];
    docs.push(format!(
        "apiVersion: rbac.authorization.k8s.io/v1\n\
         kind: ClusterRoleBinding\n\
         metadata:\n\
         \x20 name: {{{{ .Values.schedulerName | quote }}}}\n\
         {labels}\
         roleRef:\n\
         \x20 apiGroup: rbac.authorization.k8s.io\n\
         \x20 kind: ClusterRole\n\
         \x20 name: {{{{ .Values.schedulerName | quote }}}}\n\
         {SUBJECTS}"
    ));
    for role in rbac::BOUND_CLUSTER_ROLES {
        let suffix = role.rsplit(':').next().unwrap_or(role);
        docs.push(format!(
            "apiVersion: rbac.authorization.k8s.io/v1\n\
             kind: ClusterRoleBinding\n\
             metadata:\n\
             \x20 name: {{{{ printf \"%s-{suffix}\" .Values.schedulerName | quote }}}}\n\
             {labels}\
             roleRef:\n\
             \x20 apiGroup: rbac.authorization.k8s.io\n\
             \x20 kind: ClusterRole\n\
             \x20 name: {role}\n\
             {SUBJECTS}",
            role = yaml::scalar(role),
        ));
    }
    for bound in rbac::BOUND_ROLES {
        docs.push(format!(
            "apiVersion: rbac.authorization.k8s.io/v1\n\
             kind: RoleBinding\n\
             metadata:\n\
             \x20 name: {{{{ printf \"%s-{role}\" .Values.schedulerName | quote }}}}\n\
             \x20 namespace: {namespace}\n\
             {labels}\
             roleRef:\n\
             \x20 apiGroup: rbac.authorization.k8s.io\n\
             \x20 kind: Role\n\
             \x20 name: {role}\n\
             {SUBJECTS}",
            role = bound.role,
            namespace = yaml::scalar(bound.namespace),
        ));
    }
    let lease_rules = block(&render::lease_policy_rules(
        &input.lease_rules,
        Yaml::from(LEASE_NAME_MARK),
    ))
    .replace(
        LEASE_NAME_MARK,
        "{{ include \"kubesched.leaseName\" . | quote }}",
    );
    let namespaced = [
        (
            "leader-election",
            "{{ include \"kubesched.leaseNamespace\" . | quote }}".to_string(),
            (!input.lease_rules.is_empty()).then_some(lease_rules),
        ),
        (
            "authentication-reader",
            yaml::scalar(render::AUTH_CONFIGMAP_NAMESPACE),
            input
                .auth_rules
                .as_seq()
                .is_some_and(|r| !r.is_empty())
                .then(|| block(&input.auth_rules)),
        ),
    ];
    for (suffix, namespace, rules) in namespaced {
        let Some(rules) = rules else {
            continue;
        };
        let name = format!("{{{{ printf \"%s-{suffix}\" .Values.schedulerName | quote }}}}");
        docs.push(format!(
            "apiVersion: rbac.authorization.k8s.io/v1\n\
             kind: Role\n\
             metadata:\n\
             \x20 name: {name}\n\
             \x20 namespace: {namespace}\n\
             {labels}\
             rules:\n{rules}\n"
        ));
        docs.push(format!(
            "apiVersion: rbac.authorization.k8s.io/v1\n\
             kind: RoleBinding\n\
             metadata:\n\
             \x20 name: {name}\n\
             \x20 namespace: {namespace}\n\
             {labels}\
             roleRef:\n\
             \x20 apiGroup: rbac.authorization.k8s.io\n\
             \x20 kind: Role\n\
             \x20 name: {name}\n\
             {SUBJECTS}"
        ));
    }
    format!("{HEADER}{}", docs.join("---\n"))
}

const CONFIG_MAP: &str = r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ printf "%s-config" .Values.schedulerName | quote }}
  namespace: {{ .Release.Namespace | quote }}
  labels:
    {{- include "kubesched.labels" . | nindent 4 }}
data:
  @@config_key@@: |
    {{- include "kubesched.config" . | nindent 4 }}
"#;

const DEPLOYMENT: &str = r#"{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElect) }}
{{- fail "replicaCount > 1 needs leaderElect, or every replica would schedule the same pods" }}
{{- end }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Values.schedulerName | quote }}
  namespace: {{ .Release.Namespace | quote }}
  labels:
    {{- include "kubesched.labels" . | nindent 4 }}
spec:
  replicas: {{ int .Values.replicaCount }}
  selector:
    matchLabels:
      {{- include "kubesched.labels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "kubesched.labels" . | nindent 8 }}
      annotations:
        # Changes with the configuration, so that an upgrade that changes it rolls the pods.
        kubesched/config-fingerprint: {{ include "kubesched.config" . | sha256sum | quote }}
    spec:
      serviceAccountName: {{ .Values.schedulerName | quote }}
      {{- with .Values.priorityClassName }}
      priorityClassName: {{ . | quote }}
      {{- end }}
      {{- with .Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if .Values.affinity }}
      affinity:
        {{- toYaml .Values.affinity | nindent 8 }}
      {{- else if gt (int .Values.replicaCount) 1 }}
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: @@weight@@
            podAffinityTerm:
              labelSelector:
                matchLabels:
                  {{- include "kubesched.labels" . | nindent 18 }}
              topologyKey: @@topology_key@@
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        @@pod_security_context@@
      containers:
      - name: kubesched
        image: {{ include "kubesched.image" . | quote }}
        imagePullPolicy: {{ .Values.image.pullPolicy | quote }}
        args:
        @@args@@
        {{- range .Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
        ports:
        @@ports@@
        livenessProbe:
          @@liveness@@
        readinessProbe:
          @@readiness@@
        {{- with .Values.resources }}
        resources:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        securityContext:
          @@security_context@@
        volumeMounts:
        @@mounts@@
      volumes:
      - name: config
        configMap:
          name: {{ printf "%s-config" .Values.schedulerName | quote }}
"#;

fn deployment_template() -> String {
    fill(
        &format!("{HEADER}{DEPLOYMENT}"),
        &[
            ("weight", render::ANTI_AFFINITY_WEIGHT.to_string()),
            ("topology_key", yaml::scalar(render::HOSTNAME_TOPOLOGY_KEY)),
            (
                "pod_security_context",
                block(&render::pod_security_context()),
            ),
            ("args", block(&render::container_args())),
            ("ports", block(&render::container_ports())),
            ("liveness", block(&render::liveness_probe())),
            ("readiness", block(&render::readiness_probe())),
            (
                "security_context",
                block(&render::container_security_context()),
            ),
            ("mounts", block(&render::config_volume_mounts())),
        ],
    )
}

const SERVICE: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: {{ include "kubesched.metricsServiceName" . | quote }}
  namespace: {{ .Release.Namespace | quote }}
  labels:
    {{- include "kubesched.labels" . | nindent 4 }}
spec:
  selector:
    {{- include "kubesched.labels" . | nindent 4 }}
  ports:
  - name: @@port_name@@
    port: @@port@@
    targetPort: @@port_name@@
    protocol: TCP
"#;

const PDB: &str = r#"{{- if gt (int .Values.replicaCount) 1 }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ .Values.schedulerName | quote }}
  namespace: {{ .Release.Namespace | quote }}
  labels:
    {{- include "kubesched.labels" . | nindent 4 }}
spec:
  minAvailable: @@min_available@@
  selector:
    matchLabels:
      {{- include "kubesched.labels" . | nindent 6 }}
{{- end }}
"#;

const SERVICE_MONITOR: &str = r#"{{- if .Values.serviceMonitor.enabled }}
apiVersion: @@api_version@@
kind: ServiceMonitor
metadata:
  name: {{ .Values.schedulerName | quote }}
  namespace: {{ .Release.Namespace | quote }}
  labels:
    {{- include "kubesched.labels" . | nindent 4 }}
    {{- with .Values.serviceMonitor.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  selector:
    matchLabels:
      {{- include "kubesched.labels" . | nindent 6 }}
  namespaceSelector:
    matchNames:
    - {{ .Release.Namespace | quote }}
  endpoints:
  @@endpoint@@
{{- end }}
"#;

fn service_monitor_template() -> String {
    // The endpoint as the manifests have it, with the interval from the values.
    let mut endpoint = render::service_monitor_endpoint();
    if let Some(interval) = endpoint.get_mut("interval") {
        *interval = Yaml::from(INTERVAL_MARK);
    }
    let endpoint = block(&Yaml::seq([endpoint])).replace(
        INTERVAL_MARK,
        "{{ .Values.serviceMonitor.interval | quote }}",
    );
    fill(
        &format!("{HEADER}{SERVICE_MONITOR}"),
        &[
            (
                "api_version",
                render::SERVICE_MONITOR_API_VERSION.to_string(),
            ),
            ("endpoint", endpoint),
        ],
    )
}

/// Stands for the scrape interval in the emitted endpoint until it is templated.
const INTERVAL_MARK: &str = "KUBESCHED-SCRAPE-INTERVAL";

const NOTES: &str = r#"kubesched {{ .Chart.AppVersion }} runs in {{ .Release.Namespace }} as the scheduler {{ .Values.schedulerName | quote }}
({{ int .Values.replicaCount }} replica(s), leader election {{ if .Values.leaderElect }}on, Lease {{ include "kubesched.leaseNamespace" . }}/{{ include "kubesched.leaseName" . }}{{ else }}off{{ end }}).

It schedules the pods that ask for it:

  spec:
    schedulerName: {{ .Values.schedulerName }}

and leaves every other pod to the default scheduler. Check it with:

  kubectl -n {{ .Release.Namespace }} get pods -l app.kubernetes.io/instance={{ .Values.schedulerName }}
  kubectl get events --field-selector reason=Scheduled

/metrics, /healthz and /readyz answer on HTTPS port @@port@@ of the Service
{{ .Release.Namespace }}/{{ include "kubesched.metricsServiceName" . }}{{ if .Values.serviceMonitor.enabled }}, scraped through the ServiceMonitor {{ .Values.schedulerName }}{{ end }}.
The Grafana dashboard for them is deploy/dashboards/kubesched.json in kubesched's repository.
"#;

const README: &str = r#"# kubesched Helm chart

kubesched as a second scheduler: it takes the pods whose `spec.schedulerName` names it and
leaves the others to the default scheduler. The chart installs the same objects as
`kubectl apply -f deploy/kubesched.yaml` (ServiceAccount, RBAC, ConfigMap with the
KubeSchedulerConfiguration, Deployment, metrics Service, and with more than one replica a
PodDisruptionBudget and pod anti-affinity), with the options of `cargo xtask deploy` as its
default values. Both are rendered by `cargo xtask deploy` (re-render rather than edit), and
xtask's tests render this chart and compare its objects with the manifests'.

```sh
helm install kubesched deploy/chart/kubesched -n kube-system
helm install kubesched deploy/chart/kubesched -n kube-system \
  --set replicaCount=2 --set serviceMonitor.enabled=true --set image.repository=registry.example.com/kubesched
```

| value | default | what it does |
| --- | --- | --- |
| `schedulerName` | `kubesched` | `spec.schedulerName` the scheduler serves; names every object |
| `image.repository`, `image.tag`, `image.digest`, `image.pullPolicy` | `kubesched`, the version, none, `IfNotPresent` | the image (`docker build -f deploy/Dockerfile`) |
| `imagePullSecrets` | `[]` | the pod's pull secrets |
| `replicaCount` | `1` | replicas; above 1 needs `leaderElect` and adds a PodDisruptionBudget (`minAvailable: 1`) and preferred anti-affinity on `kubernetes.io/hostname` |
| `leaderElect` | `true` | leader election on a Lease |
| `leaderElection.resourceName`, `.resourceNamespace` | the scheduler name, the release namespace | the Lease; the leader-election Role may get and update only that Lease (`create` cannot be limited by name) |
| `priorityClassName` | `system-cluster-critical` | the pods' priority class |
| `resources` | requests 100m CPU, 128Mi | the container's resources |
| `nodeSelector`, `affinity`, `tolerations` | none | where the scheduler's own pods run (`affinity` replaces the default anti-affinity) |
| `plugins` | `{}` (the compiled-in default profile) | the profile's plugins per extension point (`multiPoint`, `filter`, `score`, ...), each with `enabled` and `disabled` |
| `pluginConfig` | `[]` | the profile's plugin arguments |
| `extraArgs` | `[]` | more arguments (kube-scheduler's flags, e.g. `--v=2`) |
| `serviceMonitor.enabled`, `.interval`, `.labels` | `false`, `30s`, none | a prometheus-operator ServiceMonitor scraping `/metrics` over HTTPS with Prometheus' token |

Helm's `--create-namespace` takes the place of the manifests' Namespace object. Plugins
with their own kinds (`cargo xtask deploy --plugins default,Coscheduling`) bring their
CustomResourceDefinitions in `crds/`. The image must have the plugins the profile names
compiled in (`deploy/Dockerfile`'s `FEATURES`).
"#;
