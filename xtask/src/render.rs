//! `cargo xtask deploy`: renders everything an operator needs to run kubesched as a second
//! scheduler, from a handful of options, byte-for-byte the same on every run.
//!
//! Output (relative to the output folder): `kubesched.yaml` (Namespace when not a built-in
//! one, ServiceAccount, ClusterRole + ClusterRoleBinding, Roles + RoleBindings for the
//! namespaced rules, ConfigMap with the KubeSchedulerConfiguration, Deployment, the metrics
//! Service, a PodDisruptionBudget with more than one replica, a ServiceMonitor when asked),
//! `chart/kubesched/` (the same objects as a Helm chart whose default values are these
//! options, see [`crate::chart`]), `dashboards/kubesched.json` (see [`crate::dashboard`]),
//! `Dockerfile` (+ `Dockerfile.dockerignore`) building an image with exactly the chosen
//! plugin features, and `examples/` with workloads that use the scheduler.

use crate::Error;
use crate::plugins::{DEFAULT_FEATURES, PluginMeta, Selection};
use crate::rbac::{self, Rule};
use crate::yaml::{self, Yaml};

/// The KubeSchedulerConfiguration API version the rendered configuration uses.
pub const CONFIG_API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// The KubeSchedulerConfiguration kind.
pub const CONFIG_KIND: &str = "KubeSchedulerConfiguration";
/// Where the container finds its configuration.
pub const CONFIG_DIR: &str = "/etc/kubesched";
/// The configuration's key in the ConfigMap, and its file name in [`CONFIG_DIR`].
pub const CONFIG_KEY: &str = "config.yaml";
/// The secure port serving /healthz, /readyz and /metrics (upstream's).
pub const SECURE_PORT: i64 = 10259;
/// The builder image of the Dockerfile: the same Debian release as the runtime image, so
/// the binary asks for no newer glibc than the runtime has.
pub const BUILDER_IMAGE: &str = "rust:1.95-bookworm";
/// The runtime image: glibc and libgcc only, running as a non-root user.
pub const RUNTIME_IMAGE: &str = "gcr.io/distroless/cc-debian12:nonroot";
/// The user and group `nonroot` of the distroless images.
pub const NONROOT_UID: i64 = 65532;
/// The image the example workloads run (does nothing, pulls fast).
pub const EXAMPLE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The node the HintNode example asks for (kind's single-node cluster).
pub const EXAMPLE_HINT_NODE: &str = "kind-control-plane";
/// The label HintNode reads.
pub const HINT_LABEL: &str = "hintNode";
/// The name of the HintNode example plugin.
pub const HINT_PLUGIN: &str = "HintNode";
/// The namespace upstream keeps the API server's authentication ConfigMap in.
pub const AUTH_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// The name of the secure port, in the container and in the metrics Service.
pub const SECURE_PORT_NAME: &str = "https";
/// Replicas a PodDisruptionBudget keeps up when there are several: the one leading.
pub const PDB_MIN_AVAILABLE: i64 = 1;
/// The topology the replicas' anti-affinity spreads them over.
pub const HOSTNAME_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";
/// The anti-affinity's weight: the strongest preference there is.
pub const ANTI_AFFINITY_WEIGHT: i64 = 100;
/// How often the ServiceMonitor scrapes /metrics.
pub const SCRAPE_INTERVAL: &str = "30s";
/// The Prometheus pod's own token, which /metrics' delegated authentication checks.
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// The prometheus-operator API of the ServiceMonitor.
pub const SERVICE_MONITOR_API_VERSION: &str = "monitoring.coreos.com/v1";
/// Verbs RBAC cannot limit to named objects: the name of an object to create is not known
/// when the request is authorised, and a list or watch names no object.
pub const UNNAMEABLE_VERBS: &[&str] = &["create", "list", "watch", "deletecollection"];

/// Option defaults.
pub const DEFAULT_SCHEDULER_NAME: &str = "kubesched";
/// Option defaults.
pub const DEFAULT_NAMESPACE: &str = "kube-system";
/// Option defaults.
pub const DEFAULT_OUT: &str = "deploy";

/// Namespaces every cluster has; no Namespace object is rendered for them.
const BUILTIN_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The default image: the crate's own name and version.
pub fn default_image() -> String {
    format!("kubesched:{}", env!("CARGO_PKG_VERSION"))
}

/// A configuration file given with `--config`, already parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraConfig {
    /// The path as given (it is recorded in the rendered files).
    pub source: String,
    /// Its content.
    pub value: Yaml,
}

/// What to render.
#[derive(Debug, Clone, PartialEq)]
pub struct DeployOptions {
    /// The scheduler name pods ask for (`spec.schedulerName`); also names every object.
    pub scheduler_name: String,
    /// The namespace the scheduler runs (and holds its lease) in.
    pub namespace: String,
    /// The container image.
    pub image: String,
    /// Deployment replicas (more than one needs leader election).
    pub replicas: u32,
    /// Whether leader election is on (`--no-leader-election` turns it off).
    pub leader_election: bool,
    /// The chosen plugin set; None is the default build (every in-tree plugin, the upstream
    /// default profile).
    pub plugins: Option<Selection>,
    /// The `--plugins` list as given, for the rendered command line.
    pub plugins_arg: Option<String>,
    /// A configuration to start from.
    pub extra_config: Option<ExtraConfig>,
    /// The output folder as shown in comments (the Dockerfile's build command).
    pub out_label: String,
    /// Whether a prometheus-operator ServiceMonitor scrapes the metrics Service.
    pub service_monitor: bool,
}

impl Default for DeployOptions {
    fn default() -> Self {
        Self {
            scheduler_name: DEFAULT_SCHEDULER_NAME.to_string(),
            namespace: DEFAULT_NAMESPACE.to_string(),
            image: default_image(),
            replicas: 1,
            leader_election: true,
            plugins: None,
            plugins_arg: None,
            extra_config: None,
            out_label: DEFAULT_OUT.to_string(),
            service_monitor: false,
        }
    }
}

impl DeployOptions {
    /// The `cargo xtask deploy` command line that renders these options (defaults left out).
    pub fn command_line(&self) -> String {
        let d = DeployOptions::default();
        let mut parts = vec!["cargo xtask deploy".to_string()];
        let mut opt =
            |name: &str, value: &str| parts.push(format!("--{name} {}", shell_word(value)));
        if self.scheduler_name != d.scheduler_name {
            opt("scheduler-name", &self.scheduler_name);
        }
        if self.namespace != d.namespace {
            opt("namespace", &self.namespace);
        }
        if self.image != d.image {
            opt("image", &self.image);
        }
        if self.replicas != d.replicas {
            opt("replicas", &self.replicas.to_string());
        }
        if let Some(p) = &self.plugins_arg {
            opt("plugins", p);
        }
        if let Some(c) = &self.extra_config {
            opt("config", &c.source);
        }
        if self.out_label != d.out_label {
            opt("out", &self.out_label);
        }
        if !self.leader_election {
            parts.push("--no-leader-election".to_string());
        }
        if self.service_monitor {
            parts.push("--service-monitor".to_string());
        }
        parts.join(" ")
    }

    /// The `cargo build --features` value of the image.
    pub fn cargo_features(&self) -> String {
        self.plugins
            .as_ref()
            .map_or_else(|| DEFAULT_FEATURES.to_string(), Selection::cargo_features)
    }

    fn validate(&self) -> Result<(), Error> {
        check_name("--scheduler-name", &self.scheduler_name, true)?;
        check_name("--namespace", &self.namespace, false)?;
        if self.image.is_empty() || self.image.contains(char::is_whitespace) {
            return Err(Error::new(format!(
                "--image {:?} is not an image reference",
                self.image
            )));
        }
        if self.replicas == 0 {
            return Err(Error::new("--replicas must be at least 1"));
        }
        Ok(())
    }
}

/// Object names: DNS labels (namespaces) or DNS-1123 subdomains no longer than a label, since
/// the scheduler name also becomes label values.
fn check_name(option: &str, value: &str, allow_dots: bool) -> Result<(), Error> {
    let ok_char = |c: char| {
        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (allow_dots && c == '.')
    };
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if value.len() > 63
        || !value.chars().all(ok_char)
        || !ends_ok(value.chars().next())
        || !ends_ok(value.chars().last())
    {
        return Err(Error::new(format!(
            "{option} {value:?} must be 1 to 63 lowercase letters, digits{} or '-', starting and ending with a letter or digit",
            if allow_dots { ", '.'" } else { "" }
        )));
    }
    Ok(())
}

/// Quotes a word for a shell when it needs it (only for the recorded command line).
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:,=@+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// One rendered file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFile {
    /// Its path below the output folder, with `/` separators.
    pub path: &'static str,
    /// Its content.
    pub contents: String,
}

/// The result of rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The files, in a fixed order.
    pub files: Vec<RenderedFile>,
    /// Things the user should know (printed as warnings).
    pub notes: Vec<String>,
}

impl Rendered {
    /// The file at `path`.
    pub fn file(&self, path: &str) -> Option<&str> {
        self.files
            .iter()
            .find(|f| f.path == path)
            .map(|f| f.contents.as_str())
    }
}

/// The manifests file, what `--apply` applies.
pub const MANIFESTS_FILE: &str = "kubesched.yaml";

/// The note of a rendering with `--config`: the chart's configuration is made from its
/// values alone, so what the file sets beyond them is in the manifests only.
pub fn chart_config_note(source: &str) -> String {
    format!(
        "the chart (chart/kubesched) builds its configuration from its values (schedulerName, leaderElect, leaderElection, plugins, pluginConfig) and ignores {source}: set them to match it"
    )
}

/// What the Helm chart is made from beside the options: the policy rules by scope, the
/// profile's plugins when they are not the default set, and the plugins' CRDs.
pub struct ChartParts {
    /// The ClusterRole's rules.
    pub cluster_rules: Yaml,
    /// The Lease Role's rules.
    pub lease_rules: Vec<Rule>,
    /// The authentication ConfigMap reader's rules.
    pub auth_rules: Yaml,
    /// `multiPoint` of the profile, when not the default plugin set.
    pub profile_plugins: Option<Yaml>,
    /// The plugins' custom resource definitions.
    pub crds: Vec<Yaml>,
}

/// Renders the manifests, the Dockerfile and the examples (the chart and the dashboard
/// are added by [`crate::deploy::render`]), with the parts the chart is made from.
pub fn render_manifests(opts: &DeployOptions) -> Result<(Rendered, ChartParts), Error> {
    opts.validate()?;
    let mut notes = Vec::new();
    let config = scheduler_config(opts, &mut notes)?;
    let lease_namespace = config
        .at(&["leaderElection", "resourceNamespace"])
        .and_then(Yaml::as_str)
        .unwrap_or(&opts.namespace)
        .to_string();
    let lease_name = config
        .at(&["leaderElection", "resourceName"])
        .and_then(Yaml::as_str)
        .unwrap_or(&opts.scheduler_name)
        .to_string();
    let config_text = config.to_document();

    let mut docs = Vec::new();
    if !BUILTIN_NAMESPACES.contains(&opts.namespace.as_str()) {
        docs.push(Yaml::map([
            ("apiVersion", Yaml::from("v1")),
            ("kind", Yaml::from("Namespace")),
            (
                "metadata",
                Yaml::map([("name", Yaml::from(&opts.namespace))]),
            ),
        ]));
    }
    // Custom resource definitions first: the objects after them may use their kinds.
    let crds = plugin_manifests(opts)?;
    docs.extend(crds.iter().cloned());
    docs.push(service_account(opts));
    docs.extend(rbac_documents(opts, &lease_namespace, &lease_name));
    docs.push(config_map(opts, &config_text));
    docs.push(deployment(opts, &config_text));
    docs.push(metrics_service(opts));
    if opts.replicas > 1 {
        docs.push(pod_disruption_budget(opts));
    }
    if opts.service_monitor {
        docs.push(service_monitor(opts));
    }
    if let Some(extra) = &opts.extra_config {
        notes.push(chart_config_note(&extra.source));
    }

    let manifests = format!(
        "# kubesched as a second scheduler: it schedules the pods whose spec.schedulerName is {name}.\n\
         # Rendered by `{cmd}`;\n\
         # re-render with other options rather than editing.\n\
         # Image: {out}/Dockerfile, features {features}\n\
         # Apply: kubectl apply -f {out}/{file}\n\
         ---\n{body}",
        name = opts.scheduler_name,
        cmd = opts.command_line(),
        out = opts.out_label,
        features = opts.cargo_features(),
        file = MANIFESTS_FILE,
        body = yaml::documents(&docs),
    );
    let files = vec![
        RenderedFile {
            path: "Dockerfile",
            contents: dockerfile(opts),
        },
        RenderedFile {
            path: "Dockerfile.dockerignore",
            contents: dockerignore(opts),
        },
        RenderedFile {
            path: MANIFESTS_FILE,
            contents: manifests,
        },
        RenderedFile {
            path: "examples/hint-node.yaml",
            contents: hint_node_example(opts),
        },
        RenderedFile {
            path: "examples/scheduler-name.yaml",
            contents: scheduler_name_example(opts),
        },
    ];
    let parts = ChartParts {
        cluster_rules: policy_rules(
            rbac_rules(opts)
                .iter()
                .filter(|r| scope_of(r) == Scope::Cluster),
        ),
        lease_rules: rbac_rules(opts)
            .into_iter()
            .filter(|r| scope_of(r) == Scope::LeaseNamespace)
            .collect(),
        auth_rules: policy_rules(
            rbac_rules(opts)
                .iter()
                .filter(|r| scope_of(r) == Scope::AuthConfigMapNamespace),
        ),
        profile_plugins: opts
            .plugins
            .as_ref()
            .filter(|s| !s.is_default_set)
            .map(multi_point),
        crds,
    };
    Ok((Rendered { files, notes }, parts))
}

/// The labels of every object, and the selector of the scheduler's pods.
pub fn labels(opts: &DeployOptions) -> Yaml {
    Yaml::map([
        ("app.kubernetes.io/name", Yaml::from("kubesched")),
        (
            "app.kubernetes.io/instance",
            Yaml::from(&opts.scheduler_name),
        ),
    ])
}

fn metadata(opts: &DeployOptions, name: &str, namespace: Option<&str>) -> Yaml {
    let mut entries = vec![("name".to_string(), Yaml::from(name))];
    if let Some(ns) = namespace {
        entries.push(("namespace".to_string(), Yaml::from(ns)));
    }
    entries.push(("labels".to_string(), labels(opts)));
    Yaml::Map(entries)
}

fn service_account(opts: &DeployOptions) -> Yaml {
    Yaml::map([
        ("apiVersion", Yaml::from("v1")),
        ("kind", Yaml::from("ServiceAccount")),
        (
            "metadata",
            metadata(opts, &opts.scheduler_name, Some(&opts.namespace)),
        ),
    ])
}

/// Where a rule of the RBAC table is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Cluster-wide, in the ClusterRole.
    Cluster,
    /// In a Role of the lease namespace (leader election).
    LeaseNamespace,
    /// In a Role of kube-system (the API server's authentication ConfigMap).
    AuthConfigMapNamespace,
}

/// Where `rule` is granted: leases only where the lease lives, ConfigMaps only in
/// kube-system (the scheduler reads none but the API server's authentication one), the rest
/// cluster-wide.
pub fn scope_of(rule: &Rule) -> Scope {
    match (rule.api_group, rule.resource) {
        ("coordination.k8s.io", "leases") => Scope::LeaseNamespace,
        ("", "configmaps") => Scope::AuthConfigMapNamespace,
        _ => Scope::Cluster,
    }
}

/// RBAC rules for table rows; rows with the same API group and verbs share one rule, in
/// the table's order, so the role reads like upstream's.
pub fn policy_rules<'a>(rules: impl Iterator<Item = &'a Rule>) -> Yaml {
    let mut grouped: Vec<(&str, &[&str], Vec<&str>)> = Vec::new();
    for r in rules {
        match grouped
            .iter_mut()
            .find(|(group, verbs, _)| *group == r.api_group && *verbs == r.verbs)
        {
            Some((_, _, resources)) => resources.push(r.resource),
            None => grouped.push((r.api_group, r.verbs, vec![r.resource])),
        }
    }
    Yaml::Seq(
        grouped
            .into_iter()
            .map(|(group, verbs, resources)| {
                Yaml::map([
                    ("apiGroups", Yaml::seq([group])),
                    ("resources", Yaml::seq(resources)),
                    ("verbs", Yaml::seq(verbs.iter().copied())),
                ])
            })
            .collect(),
    )
}

fn subjects(opts: &DeployOptions) -> Yaml {
    Yaml::seq([Yaml::map([
        ("kind", Yaml::from("ServiceAccount")),
        ("name", Yaml::from(&opts.scheduler_name)),
        ("namespace", Yaml::from(&opts.namespace)),
    ])])
}

/// The rules of the lease Role: the verbs RBAC can limit by name only on the lease
/// (`resourceNames`), as upstream's `system:kube-scheduler` has it, the others (create) in
/// a rule of their own.
pub fn lease_policy_rules(rules: &[Rule], lease_name: Yaml) -> Yaml {
    let mut out = Vec::new();
    for r in rules {
        let (unnamed, named): (Vec<&str>, Vec<&str>) =
            r.verbs.iter().partition(|v| UNNAMEABLE_VERBS.contains(v));
        if !unnamed.is_empty() {
            out.push(Yaml::map([
                ("apiGroups", Yaml::seq([r.api_group])),
                ("resources", Yaml::seq([r.resource])),
                ("verbs", Yaml::seq(unnamed)),
            ]));
        }
        if !named.is_empty() {
            out.push(Yaml::map([
                ("apiGroups", Yaml::seq([r.api_group])),
                ("resources", Yaml::seq([r.resource])),
                ("resourceNames", Yaml::seq([lease_name.clone()])),
                ("verbs", Yaml::seq(named)),
            ]));
        }
    }
    Yaml::Seq(out)
}

fn role_ref(kind: &str, name: &str) -> Yaml {
    Yaml::map([
        ("apiGroup", Yaml::from("rbac.authorization.k8s.io")),
        ("kind", Yaml::from(kind)),
        ("name", Yaml::from(name)),
    ])
}

/// Whether a plugin is in the deployment: the chosen ones with `--plugins`, else every
/// in-tree plugin of the default build (opt-in ones are left out).
fn is_chosen(opts: &DeployOptions, plugin: &str) -> bool {
    match opts.plugins.as_ref() {
        Some(sel) => sel.plugins.iter().any(|p| p.name == plugin),
        None => !PluginMeta::of(&crate::workspace_root(), plugin).opt_in,
    }
}

/// The manifests the chosen plugins bring (their CustomResourceDefinitions), read from
/// each plugin crate's `deploy/` folder, in plugin order.
fn plugin_manifests(opts: &DeployOptions) -> Result<Vec<Yaml>, Error> {
    let Some(sel) = opts.plugins.as_ref() else {
        return Ok(Vec::new());
    };
    let mut docs = Vec::new();
    for p in &sel.plugins {
        for file in PluginMeta::of(&crate::workspace_root(), &p.name).manifests() {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| Error::new(format!("reading {}: {e}", file.display())))?;
            let parsed = yaml::parse_documents(&text)
                .map_err(|e| Error::new(format!("{}: {e}", file.display())))?;
            docs.extend(parsed);
        }
    }
    Ok(docs)
}

/// The RBAC rows of a deployment: the kube backend's fixed table, then the rows the chosen
/// plugins' kind declarations need (every in-tree plugin's without `--plugins`), merged
/// per API group and resource and sorted by them.
pub fn rbac_rules(opts: &DeployOptions) -> Vec<Rule> {
    let chosen = |plugin: &str| is_chosen(opts, plugin);
    let mut derived: Vec<Rule> = Vec::new();
    for access in crate::plugin_kinds::PLUGIN_ACCESS
        .iter()
        .filter(|a| chosen(a.plugin))
    {
        for rule in access.rules {
            match derived
                .iter_mut()
                .find(|r| r.api_group == rule.api_group && r.resource == rule.resource)
            {
                Some(r) => r.verbs = union(r.verbs, rule.verbs),
                None => derived.push(*rule),
            }
        }
    }
    derived.sort_by_key(|r| (r.api_group, r.resource));
    let mut rules = rbac::RULES.to_vec();
    rules.extend(derived.into_iter().filter(|d| {
        !rbac::RULES
            .iter()
            .any(|r| r.api_group == d.api_group && r.resource == d.resource)
    }));
    rules
}

/// The union of two verb lists in `get, list, watch, create, update, patch, delete` order
/// (leaked: xtask renders once and exits).
fn union(a: &'static [&'static str], b: &'static [&'static str]) -> &'static [&'static str] {
    if b.iter().all(|v| a.contains(v)) {
        return a;
    }
    const ORDER: [&str; 7] = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let mut all: Vec<&'static str> = a.iter().chain(b).copied().collect();
    all.sort_by_key(|v| ORDER.iter().position(|o| o == v).unwrap_or(ORDER.len()));
    all.dedup();
    Box::leak(all.into_boxed_slice())
}

/// ClusterRole and binding from the kube backend's table and the chosen plugins'
/// declarations, plus a Role and binding per namespaced scope that has rules.
fn rbac_documents(opts: &DeployOptions, lease_namespace: &str, lease_name: &str) -> Vec<Yaml> {
    let name = &opts.scheduler_name;
    let rules = rbac_rules(opts);
    let in_scope = |scope: Scope| rules.iter().filter(move |r| scope_of(r) == scope);
    let mut docs = vec![
        Yaml::map([
            ("apiVersion", Yaml::from("rbac.authorization.k8s.io/v1")),
            ("kind", Yaml::from("ClusterRole")),
            ("metadata", metadata(opts, name, None)),
            ("rules", policy_rules(in_scope(Scope::Cluster))),
        ]),
        Yaml::map([
            ("apiVersion", Yaml::from("rbac.authorization.k8s.io/v1")),
            ("kind", Yaml::from("ClusterRoleBinding")),
            ("metadata", metadata(opts, name, None)),
            ("roleRef", role_ref("ClusterRole", name)),
            ("subjects", subjects(opts)),
        ]),
    ];
    // Built-in roles, bound as they are (system:auth-delegator: TokenReview and
    // SubjectAccessReview for the secure port).
    for role in rbac::BOUND_CLUSTER_ROLES {
        let suffix = role.rsplit(':').next().unwrap_or(role);
        docs.push(Yaml::map([
            ("apiVersion", Yaml::from("rbac.authorization.k8s.io/v1")),
            ("kind", Yaml::from("ClusterRoleBinding")),
            (
                "metadata",
                metadata(opts, &format!("{name}-{suffix}"), None),
            ),
            ("roleRef", role_ref("ClusterRole", role)),
            ("subjects", subjects(opts)),
        ]));
    }
    // Built-in namespaced roles, bound in their namespace (extension-apiserver-
    // authentication-reader: the ConfigMap delegated authentication reads its CAs from).
    for bound in rbac::BOUND_ROLES {
        docs.push(Yaml::map([
            ("apiVersion", Yaml::from("rbac.authorization.k8s.io/v1")),
            ("kind", Yaml::from("RoleBinding")),
            (
                "metadata",
                metadata(
                    opts,
                    &format!("{name}-{}", bound.role),
                    Some(bound.namespace),
                ),
            ),
            ("roleRef", role_ref("Role", bound.role)),
            ("subjects", subjects(opts)),
        ]));
    }
    for (scope, suffix, namespace) in [
        (Scope::LeaseNamespace, "leader-election", lease_namespace),
        (
            Scope::AuthConfigMapNamespace,
            "authentication-reader",
            AUTH_CONFIGMAP_NAMESPACE,
        ),
    ] {
        if in_scope(scope).next().is_none() {
            continue;
        }
        let role = format!("{name}-{suffix}");
        let role_rules = if scope == Scope::LeaseNamespace {
            let lease: Vec<Rule> = in_scope(scope).copied().collect();
            lease_policy_rules(&lease, Yaml::from(lease_name))
        } else {
            policy_rules(in_scope(scope))
        };
        docs.push(Yaml::map([
            ("apiVersion", Yaml::from("rbac.authorization.k8s.io/v1")),
            ("kind", Yaml::from("Role")),
            ("metadata", metadata(opts, &role, Some(namespace))),
            ("rules", role_rules),
        ]));
        docs.push(Yaml::map([
            ("apiVersion", Yaml::from("rbac.authorization.k8s.io/v1")),
            ("kind", Yaml::from("RoleBinding")),
            ("metadata", metadata(opts, &role, Some(namespace))),
            ("roleRef", role_ref("Role", &role)),
            ("subjects", subjects(opts)),
        ]));
    }
    docs
}

fn expect_map<'a>(value: &'a mut Yaml, what: &str, source: &str) -> Result<&'a mut Yaml, Error> {
    match value {
        Yaml::Map(_) => Ok(value),
        other => Err(Error::new(format!(
            "{source}: {what} must be a map, found {}",
            other.kind()
        ))),
    }
}

/// The KubeSchedulerConfiguration: the `--config` file when given, with what it leaves
/// unset filled in from the options (`--no-leader-election` always wins).
pub fn scheduler_config(opts: &DeployOptions, notes: &mut Vec<String>) -> Result<Yaml, Error> {
    let (mut cfg, source) = match &opts.extra_config {
        Some(extra) => (extra.value.clone(), extra.source.as_str()),
        None => (Yaml::Map(Vec::new()), "configuration"),
    };
    expect_map(&mut cfg, "the configuration", source)?;
    cfg.set_default("apiVersion", Yaml::from(CONFIG_API_VERSION));
    cfg.set_default("kind", Yaml::from(CONFIG_KIND));
    if cfg.get("kind").and_then(Yaml::as_str) != Some(CONFIG_KIND) {
        return Err(Error::new(format!("{source}: kind must be {CONFIG_KIND}")));
    }

    let le = cfg
        .set_default("leaderElection", Yaml::Map(Vec::new()))
        .ok_or_else(|| Error::new("the configuration is a map"))?;
    let le = expect_map(le, "leaderElection", source)?;
    if opts.leader_election {
        le.set_default("leaderElect", Yaml::Bool(true));
    } else if let Some(v) = le.set_default("leaderElect", Yaml::Bool(false)) {
        *v = Yaml::Bool(false);
    }
    le.set_default("resourceName", Yaml::from(&opts.scheduler_name));
    le.set_default("resourceNamespace", Yaml::from(&opts.namespace));
    let leader_elect = le.get("leaderElect").and_then(Yaml::as_bool);
    let Some(leader_elect) = leader_elect else {
        return Err(Error::new(format!(
            "{source}: leaderElection.leaderElect must be true or false"
        )));
    };
    if opts.replicas > 1 && !leader_elect {
        return Err(Error::new(format!(
            "{} replicas need leader election, or they would all schedule the same pods",
            opts.replicas
        )));
    }

    let profiles = cfg
        .set_default("profiles", Yaml::Seq(Vec::new()))
        .ok_or_else(|| Error::new("the configuration is a map"))?;
    let Yaml::Seq(profiles) = profiles else {
        return Err(Error::new(format!(
            "{source}: profiles must be a list, found {}",
            profiles.kind()
        )));
    };
    if profiles.is_empty() {
        profiles.push(Yaml::Map(Vec::new()));
    }
    let lone = profiles.len() == 1;
    for (i, profile) in profiles.iter_mut().enumerate() {
        let profile = expect_map(profile, &format!("profiles[{i}]"), source)?;
        // Only a lone profile gets the scheduler's name: several must name themselves.
        if lone {
            profile.set_default("schedulerName", Yaml::from(&opts.scheduler_name));
        }
        if let Some(sel) = opts.plugins.as_ref().filter(|s| !s.is_default_set) {
            if profile.get("plugins").is_none() {
                profile.set_default("plugins", multi_point(sel));
            } else {
                notes.push(format!(
                    "profiles[{i}] of {source} lists its own plugins: --plugins only chooses the image's features for it"
                ));
            }
        }
    }
    let named = profiles.iter().any(|p| {
        p.get("schedulerName").and_then(Yaml::as_str) == Some(opts.scheduler_name.as_str())
    });
    if !named {
        notes.push(format!(
            "no profile of {source} is named {}: pods asking for that scheduler name (as the examples do) will not be scheduled",
            opts.scheduler_name
        ));
    }
    Ok(cfg)
}

/// The chosen plugins as the profile's `multiPoint`: every default off, then exactly these,
/// with their default-profile weights.
fn multi_point(sel: &Selection) -> Yaml {
    let enabled = sel.plugins.iter().map(|p| {
        let mut entry = vec![("name".to_string(), Yaml::from(&p.name))];
        if let Some(w) = p.weight {
            entry.push(("weight".to_string(), Yaml::Int(i64::from(w))));
        }
        Yaml::Map(entry)
    });
    Yaml::map([(
        "multiPoint",
        Yaml::map([
            ("enabled", Yaml::Seq(enabled.collect())),
            (
                "disabled",
                Yaml::seq([Yaml::map([("name", Yaml::from("*"))])]),
            ),
        ]),
    )])
}

fn config_map_name(opts: &DeployOptions) -> String {
    format!("{}-config", opts.scheduler_name)
}

fn config_map(opts: &DeployOptions, config_text: &str) -> Yaml {
    Yaml::map([
        ("apiVersion", Yaml::from("v1")),
        ("kind", Yaml::from("ConfigMap")),
        (
            "metadata",
            metadata(opts, &config_map_name(opts), Some(&opts.namespace)),
        ),
        ("data", Yaml::map([(CONFIG_KEY, Yaml::from(config_text))])),
    ])
}

/// 64-bit FNV-1a: a stable fingerprint of the configuration, so a changed ConfigMap rolls
/// the Deployment's pods on the next apply.
pub fn fingerprint(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn https_probe(path: &str) -> Yaml {
    Yaml::map([
        ("path", Yaml::from(path)),
        ("port", Yaml::Int(SECURE_PORT)),
        ("scheme", Yaml::from("HTTPS")),
    ])
}

/// The container's arguments: the configuration the ConfigMap mounts.
pub fn container_args() -> Yaml {
    Yaml::seq([
        "run".to_string(),
        "--config".to_string(),
        format!("{CONFIG_DIR}/{CONFIG_KEY}"),
    ])
}

/// The container's one port, the secure port.
pub fn container_ports() -> Yaml {
    Yaml::seq([Yaml::map([
        ("name", Yaml::from(SECURE_PORT_NAME)),
        ("containerPort", Yaml::Int(SECURE_PORT)),
        ("protocol", Yaml::from("TCP")),
    ])])
}

/// Upstream's static-pod numbers: a slow first sync must not get the pod killed.
pub fn liveness_probe() -> Yaml {
    Yaml::map([
        ("httpGet", https_probe("/healthz")),
        ("initialDelaySeconds", Yaml::Int(10)),
        ("periodSeconds", Yaml::Int(10)),
        ("timeoutSeconds", Yaml::Int(15)),
        ("failureThreshold", Yaml::Int(8)),
    ])
}

/// Ready once the first lists are in (what /readyz says).
pub fn readiness_probe() -> Yaml {
    Yaml::map([
        ("httpGet", https_probe("/readyz")),
        ("periodSeconds", Yaml::Int(5)),
        ("timeoutSeconds", Yaml::Int(15)),
    ])
}

/// The container's default requests.
pub fn default_resources() -> Yaml {
    Yaml::map([(
        "requests",
        Yaml::map([("cpu", Yaml::from("100m")), ("memory", Yaml::from("128Mi"))]),
    )])
}

/// Nothing but reading its configuration and serving a port.
pub fn container_security_context() -> Yaml {
    Yaml::map([
        ("allowPrivilegeEscalation", Yaml::Bool(false)),
        ("readOnlyRootFilesystem", Yaml::Bool(true)),
        ("capabilities", Yaml::map([("drop", Yaml::seq(["ALL"]))])),
    ])
}

/// distroless's nonroot user, numerically: the kubelet can only check a numeric user
/// against runAsNonRoot.
pub fn pod_security_context() -> Yaml {
    Yaml::map([
        ("runAsNonRoot", Yaml::Bool(true)),
        ("runAsUser", Yaml::Int(NONROOT_UID)),
        ("runAsGroup", Yaml::Int(NONROOT_UID)),
        (
            "seccompProfile",
            Yaml::map([("type", Yaml::from("RuntimeDefault"))]),
        ),
    ])
}

/// Where the container reads the ConfigMap.
pub fn config_volume_mounts() -> Yaml {
    Yaml::seq([Yaml::map([
        ("name", Yaml::from("config")),
        ("mountPath", Yaml::from(CONFIG_DIR)),
        ("readOnly", Yaml::Bool(true)),
    ])])
}

/// Replicas on different nodes when they can be: a node going down then takes only one,
/// and another takes the lease over.
pub fn anti_affinity(selector: Yaml) -> Yaml {
    Yaml::map([(
        "podAntiAffinity",
        Yaml::map([(
            "preferredDuringSchedulingIgnoredDuringExecution",
            Yaml::seq([Yaml::map([
                ("weight", Yaml::Int(ANTI_AFFINITY_WEIGHT)),
                (
                    "podAffinityTerm",
                    Yaml::map([
                        ("labelSelector", Yaml::map([("matchLabels", selector)])),
                        ("topologyKey", Yaml::from(HOSTNAME_TOPOLOGY_KEY)),
                    ]),
                ),
            ])]),
        )]),
    )])
}

fn deployment(opts: &DeployOptions, config_text: &str) -> Yaml {
    let container = Yaml::map([
        ("name", Yaml::from("kubesched")),
        ("image", Yaml::from(&opts.image)),
        ("imagePullPolicy", Yaml::from("IfNotPresent")),
        ("args", container_args()),
        ("ports", container_ports()),
        ("livenessProbe", liveness_probe()),
        ("readinessProbe", readiness_probe()),
        ("resources", default_resources()),
        ("securityContext", container_security_context()),
        ("volumeMounts", config_volume_mounts()),
    ]);
    let mut pod_spec = vec![
        (
            "serviceAccountName".to_string(),
            Yaml::from(&opts.scheduler_name),
        ),
        (
            "priorityClassName".to_string(),
            Yaml::from("system-cluster-critical"),
        ),
    ];
    if opts.replicas > 1 {
        pod_spec.push(("affinity".to_string(), anti_affinity(labels(opts))));
    }
    pod_spec.extend([
        ("securityContext".to_string(), pod_security_context()),
        ("containers".to_string(), Yaml::seq([container])),
        (
            "volumes".to_string(),
            Yaml::seq([Yaml::map([
                ("name", Yaml::from("config")),
                (
                    "configMap",
                    Yaml::map([("name", Yaml::from(config_map_name(opts)))]),
                ),
            ])]),
        ),
    ]);
    Yaml::map([
        ("apiVersion", Yaml::from("apps/v1")),
        ("kind", Yaml::from("Deployment")),
        (
            "metadata",
            metadata(opts, &opts.scheduler_name, Some(&opts.namespace)),
        ),
        (
            "spec",
            Yaml::map([
                ("replicas", Yaml::from(opts.replicas)),
                ("selector", Yaml::map([("matchLabels", labels(opts))])),
                (
                    "template",
                    Yaml::map([
                        (
                            "metadata",
                            Yaml::map([
                                ("labels", labels(opts)),
                                (
                                    "annotations",
                                    Yaml::map([(
                                        "kubesched/config-fingerprint",
                                        Yaml::from(fingerprint(config_text)),
                                    )]),
                                ),
                            ]),
                        ),
                        ("spec", Yaml::Map(pod_spec)),
                    ]),
                ),
            ]),
        ),
    ])
}

/// The metrics Service's name: `<scheduler name>-metrics`, made a DNS label (a Service
/// name may hold no dot and no more than 63 characters) as the chart's helper does it.
pub fn metrics_service_name(scheduler_name: &str) -> String {
    let name = format!("{scheduler_name}-metrics").replace('.', "-");
    let cut: String = name.chars().take(63).collect();
    cut.strip_suffix('-').map_or(cut.clone(), str::to_string)
}

/// A Service in front of the secure port, for Prometheus (and the ServiceMonitor) to find
/// the replicas' /metrics.
fn metrics_service(opts: &DeployOptions) -> Yaml {
    Yaml::map([
        ("apiVersion", Yaml::from("v1")),
        ("kind", Yaml::from("Service")),
        (
            "metadata",
            metadata(
                opts,
                &metrics_service_name(&opts.scheduler_name),
                Some(&opts.namespace),
            ),
        ),
        (
            "spec",
            Yaml::map([
                ("selector", labels(opts)),
                (
                    "ports",
                    Yaml::seq([Yaml::map([
                        ("name", Yaml::from(SECURE_PORT_NAME)),
                        ("port", Yaml::Int(SECURE_PORT)),
                        ("targetPort", Yaml::from(SECURE_PORT_NAME)),
                        ("protocol", Yaml::from("TCP")),
                    ])]),
                ),
            ]),
        ),
    ])
}

/// With several replicas, a drain never takes them all at once.
fn pod_disruption_budget(opts: &DeployOptions) -> Yaml {
    Yaml::map([
        ("apiVersion", Yaml::from("policy/v1")),
        ("kind", Yaml::from("PodDisruptionBudget")),
        (
            "metadata",
            metadata(opts, &opts.scheduler_name, Some(&opts.namespace)),
        ),
        (
            "spec",
            Yaml::map([
                ("minAvailable", Yaml::Int(PDB_MIN_AVAILABLE)),
                ("selector", Yaml::map([("matchLabels", labels(opts))])),
            ]),
        ),
    ])
}

/// The scrape endpoint of the ServiceMonitor: HTTPS with the Prometheus pod's token (the
/// secure port authorises /metrics through the API server) and the serving certificate
/// unchecked, since by default it is self-signed, as kube-prometheus scrapes kube-scheduler.
pub fn service_monitor_endpoint() -> Yaml {
    Yaml::map([
        ("port", Yaml::from(SECURE_PORT_NAME)),
        ("scheme", Yaml::from("https")),
        ("path", Yaml::from("/metrics")),
        ("interval", Yaml::from(SCRAPE_INTERVAL)),
        ("bearerTokenFile", Yaml::from(SERVICE_ACCOUNT_TOKEN)),
        (
            "tlsConfig",
            Yaml::map([("insecureSkipVerify", Yaml::Bool(true))]),
        ),
    ])
}

/// A prometheus-operator ServiceMonitor for the metrics Service.
fn service_monitor(opts: &DeployOptions) -> Yaml {
    Yaml::map([
        ("apiVersion", Yaml::from(SERVICE_MONITOR_API_VERSION)),
        ("kind", Yaml::from("ServiceMonitor")),
        (
            "metadata",
            metadata(opts, &opts.scheduler_name, Some(&opts.namespace)),
        ),
        (
            "spec",
            Yaml::map([
                ("selector", Yaml::map([("matchLabels", labels(opts))])),
                (
                    "namespaceSelector",
                    Yaml::map([("matchNames", Yaml::seq([opts.namespace.as_str()]))]),
                ),
                ("endpoints", Yaml::seq([service_monitor_endpoint()])),
            ]),
        ),
    ])
}

/// Where `cargo vendor`'s source replacement goes for an offline image build: a file of its
/// own, so the repository's `.cargo/config.toml` (the xtask alias) stays as it is.
pub const VENDOR_CONFIG: &str = ".cargo/vendor.toml";

fn dockerfile(opts: &DeployOptions) -> String {
    format!(
        r#"# syntax=docker/dockerfile:1
# kubesched with exactly the chosen plugins compiled in.
# Rendered by `{cmd}`.
# Build from the repository root:
#   docker build -f {out}/Dockerfile -t {image} .
# FEATURES picks the plugin set (one `plugin-<kebab-case name>` feature per plugin, plus a
# registry backend), e.g. --build-arg FEATURES=inventory,plugin-node-name,plugin-priority-sort,plugin-default-binder
# GIT_COMMIT is what `kubesched version` reports (.git is not in the build context):
#   --build-arg GIT_COMMIT=$(git rev-parse HEAD)
#
# The build reaches nothing but the crate registry. With the crates vendored first, it
# reaches nothing at all (cargo runs --offline when vendor/ and {vendor_config} exist):
#   cargo vendor --locked vendor > {vendor_config}
#   docker build --network=none -f {out}/Dockerfile -t {image} .   # base images already pulled

FROM {builder} AS builder
ARG FEATURES="{features}"
ARG GIT_COMMIT=""
WORKDIR /src
COPY . .
# The registry and target folders are cache mounts, so the binary is copied out of them.
# rustls (no OpenSSL) leaves glibc and libgcc as the only shared libraries; the builder's
# Debian release (bookworm) matches the runtime's (debian12), so their versions agree.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    set -eu; \
    offline=""; \
    if [ -d vendor ] && [ -f {vendor_config} ]; then offline="--offline --config {vendor_config}"; fi; \
    KUBESCHED_GIT_COMMIT="$GIT_COMMIT" CARGO_PROFILE_RELEASE_STRIP=symbols \
    cargo build --release --locked $offline -p kubesched --no-default-features --features "$FEATURES"; \
    cp target/release/kubesched /usr/local/bin/kubesched

# distroless: glibc, libgcc, CA certificates and a non-root user; no shell, no package manager.
FROM {runtime}
COPY --from=builder /usr/local/bin/kubesched /usr/local/bin/kubesched
USER {uid}:{uid}
EXPOSE {port}
# With no subcommand kubesched takes kube-scheduler's flags, so a kube-scheduler Deployment's
# `args: [--config=/etc/kubesched/scheduler.yaml]` runs as it is; `kubesched` is on PATH for
# a Deployment that sets `command:`.
ENTRYPOINT ["/usr/local/bin/kubesched"]
"#,
        cmd = opts.command_line(),
        out = opts.out_label,
        image = opts.image,
        builder = BUILDER_IMAGE,
        features = opts.cargo_features(),
        runtime = RUNTIME_IMAGE,
        port = SECURE_PORT,
        uid = NONROOT_UID,
        vendor_config = VENDOR_CONFIG,
    )
}

fn dockerignore(opts: &DeployOptions) -> String {
    format!(
        "# Build context of {out}/Dockerfile (BuildKit reads <Dockerfile>.dockerignore). Rendered by `cargo xtask deploy`.\n\
         .git\n\
         target\n\
         **/*.snap.new\n\
         **/*.pending-snap\n",
        out = opts.out_label
    )
}

fn example_labels(app: &str) -> Yaml {
    Yaml::map([("app", Yaml::from(app))])
}

fn example_deployment(
    opts: &DeployOptions,
    app: &str,
    replicas: i64,
    pod_labels: Yaml,
    extra_spec: Vec<(String, Yaml)>,
) -> Yaml {
    let mut spec = vec![(
        "schedulerName".to_string(),
        Yaml::from(&opts.scheduler_name),
    )];
    spec.extend(extra_spec);
    spec.push((
        "containers".to_string(),
        Yaml::seq([Yaml::map([
            ("name", Yaml::from("pause")),
            ("image", Yaml::from(EXAMPLE_IMAGE)),
            (
                "resources",
                Yaml::map([(
                    "requests",
                    Yaml::map([("cpu", Yaml::from("10m")), ("memory", Yaml::from("16Mi"))]),
                )]),
            ),
        ])]),
    ));
    Yaml::map([
        ("apiVersion", Yaml::from("apps/v1")),
        ("kind", Yaml::from("Deployment")),
        (
            "metadata",
            Yaml::map([
                ("name", Yaml::from(app)),
                ("namespace", Yaml::from("default")),
            ]),
        ),
        (
            "spec",
            Yaml::map([
                ("replicas", Yaml::Int(replicas)),
                (
                    "selector",
                    Yaml::map([("matchLabels", example_labels(app))]),
                ),
                (
                    "template",
                    Yaml::map([
                        ("metadata", Yaml::map([("labels", pod_labels)])),
                        ("spec", Yaml::Map(spec)),
                    ]),
                ),
            ]),
        ),
    ])
}

fn scheduler_name_example(opts: &DeployOptions) -> String {
    let app = format!("{}-example", opts.scheduler_name);
    let doc = example_deployment(opts, &app, 3, example_labels(&app), Vec::new());
    format!(
        "# Pods that kubesched schedules: spec.schedulerName names it ({name}); the default scheduler\n\
         # leaves them alone. Rendered by `cargo xtask deploy`.\n\
         #   kubectl apply -f {out}/examples/scheduler-name.yaml\n\
         #   kubectl get events --field-selector reason=Scheduled   # \"Successfully assigned ...\" from {name}\n\
         {doc}",
        name = opts.scheduler_name,
        out = opts.out_label,
        doc = doc.to_document()
    )
}

fn hint_node_example(opts: &DeployOptions) -> String {
    let app = "hinted";
    let mut pod_labels = vec![("app".to_string(), Yaml::from(app))];
    pod_labels.push((HINT_LABEL.to_string(), Yaml::from(EXAMPLE_HINT_NODE)));
    // kind's only node is a control-plane node; tolerating its taint keeps the example
    // about HintNode.
    let tolerations = Yaml::seq([Yaml::map([
        ("key", Yaml::from("node-role.kubernetes.io/control-plane")),
        ("operator", Yaml::from("Exists")),
        ("effect", Yaml::from("NoSchedule")),
    ])]);
    let doc = example_deployment(
        opts,
        app,
        2,
        Yaml::Map(pod_labels),
        vec![("tolerations".to_string(), tolerations)],
    );
    let enabled = opts
        .plugins
        .as_ref()
        .is_some_and(|s| s.plugins.iter().any(|p| p.name == HINT_PLUGIN));
    let how = if enabled {
        "# This rendering compiles HintNode into the image and enables it in the profile.\n"
            .to_string()
    } else {
        "# HintNode (examples/hint-node-plugin) is not in the default build; render and build with it:\n\
         #   cargo xtask deploy --plugins default,HintNode\n"
            .to_string()
    };
    format!(
        "# Pods placed by the HintNode example plugin: each runs only on the node its `{label}` label\n\
         # names. Set the label to one of `kubectl get nodes` ({node} is kind's single node).\n\
         {how}\
         # With HintNode enabled, every pod of {name} needs the label (a pod without it fits no node).\n\
         {doc}",
        label = HINT_LABEL,
        node = EXAMPLE_HINT_NODE,
        name = opts.scheduler_name,
        doc = doc.to_document()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_fnv1a() {
        // Reference values of 64-bit FNV-1a.
        assert_eq!(fingerprint(""), "cbf29ce484222325");
        assert_eq!(fingerprint("a"), "af63dc4c8601ec8c");
    }

    #[test]
    fn names_are_checked() {
        for bad in ["", "Kubesched", "-a", "a-", "a_b", &"a".repeat(64)] {
            let opts = DeployOptions {
                scheduler_name: bad.to_string(),
                ..DeployOptions::default()
            };
            assert!(crate::deploy::render(&opts).is_err(), "{bad:?} accepted");
        }
        let opts = DeployOptions {
            namespace: "a.b".to_string(),
            ..DeployOptions::default()
        };
        assert!(crate::deploy::render(&opts).is_err());
        let opts = DeployOptions {
            scheduler_name: "my.scheduler-2".to_string(),
            ..DeployOptions::default()
        };
        assert!(crate::deploy::render(&opts).is_ok());
    }

    #[test]
    fn command_line_names_only_changed_options() {
        assert_eq!(
            DeployOptions::default().command_line(),
            "cargo xtask deploy"
        );
        let opts = DeployOptions {
            replicas: 2,
            image: "reg.example/kubesched:slim".to_string(),
            extra_config: Some(ExtraConfig {
                source: "my config.yaml".to_string(),
                value: Yaml::Map(Vec::new()),
            }),
            ..DeployOptions::default()
        };
        assert_eq!(
            opts.command_line(),
            "cargo xtask deploy --image reg.example/kubesched:slim --replicas 2 --config 'my config.yaml'"
        );
    }
}
