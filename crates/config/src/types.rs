//! The KubeSchedulerConfiguration types (`kubescheduler.config.k8s.io/v1`), with serde names
//! and scalar defaults as upstream's. Unknown fields are refused, as upstream decodes strictly.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::serde_go;

/// The configuration API version kubesched reads and writes.
pub const API_VERSION_V1: &str = "kubescheduler.config.k8s.io/v1";
/// The older API version kubesched also reads (same shape as v1).
pub const API_VERSION_V1BETA3: &str = "kubescheduler.config.k8s.io/v1beta3";
/// The only accepted `kind`.
pub const KIND: &str = "KubeSchedulerConfiguration";
/// The scheduler name of the default profile.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// Default `parallelism`.
pub const DEFAULT_PARALLELISM: i32 = 16;
/// Default `percentageOfNodesToScore` (0: adaptive).
pub const DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE: i32 = 0;
/// Default `podInitialBackoffSeconds`.
pub const DEFAULT_POD_INITIAL_BACKOFF_SECONDS: i64 = 1;
/// Default `podMaxBackoffSeconds`.
pub const DEFAULT_POD_MAX_BACKOFF_SECONDS: i64 = 10;
/// Default `leaderElection.resourceLock`.
pub const DEFAULT_RESOURCE_LOCK: &str = "leases";
/// Default `leaderElection.resourceNamespace`.
pub const DEFAULT_LOCK_NAMESPACE: &str = "kube-system";
/// Default `leaderElection.resourceName`.
pub const DEFAULT_LOCK_NAME: &str = "kube-scheduler";
/// Default `leaderElection.leaseDuration`.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default `leaderElection.renewDeadline`.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default `leaderElection.retryPeriod`.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// Default `clientConnection.contentType`.
pub const DEFAULT_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// Default `clientConnection.qps`.
pub const DEFAULT_QPS: f32 = 50.0;
/// Default `clientConnection.burst`.
pub const DEFAULT_BURST: i32 = 100;
/// The HTTP timeout of an extender whose `httpTimeout` is zero (upstream applies it when it
/// builds the extender client, not as a config default, so the config keeps zero).
pub const DEFAULT_EXTENDER_HTTP_TIMEOUT: Duration = Duration::from_secs(5);

fn default_api_version() -> String {
    API_VERSION_V1.to_string()
}
fn default_kind() -> String {
    KIND.to_string()
}
fn default_parallelism() -> i32 {
    DEFAULT_PARALLELISM
}
fn default_initial_backoff() -> i64 {
    DEFAULT_POD_INITIAL_BACKOFF_SECONDS
}
fn default_max_backoff() -> i64 {
    DEFAULT_POD_MAX_BACKOFF_SECONDS
}
fn default_true() -> bool {
    true
}
fn is_false(b: &bool) -> bool {
    !*b
}
fn is_zero_duration(d: &Duration) -> bool {
    d.is_zero()
}

/// The scheduler's configuration file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeSchedulerConfiguration {
    /// `kubescheduler.config.k8s.io/v1` (or `v1beta3` on input).
    #[serde(default = "default_api_version")]
    pub api_version: String,
    /// `KubeSchedulerConfiguration`.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// How many nodes Filter and Score run on at once.
    #[serde(default = "default_parallelism")]
    pub parallelism: i32,
    /// Share of nodes to find feasible before scoring; 0 means adaptive.
    #[serde(default)]
    pub percentage_of_nodes_to_score: i32,
    /// Initial backoff of an unschedulable pod, seconds.
    #[serde(default = "default_initial_backoff")]
    pub pod_initial_backoff_seconds: i64,
    /// Maximum backoff of an unschedulable pod, seconds.
    #[serde(default = "default_max_backoff")]
    pub pod_max_backoff_seconds: i64,
    /// Leader election.
    #[serde(default)]
    pub leader_election: LeaderElectionConfiguration,
    /// The API client's settings.
    #[serde(default)]
    pub client_connection: ClientConnectionConfiguration,
    /// Scheduling profiles, one per `schedulerName`.
    #[serde(default)]
    pub profiles: Vec<Profile>,
    /// HTTP extenders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extenders: Vec<Extender>,
    /// Wait for leadership before filling the informer caches.
    #[serde(default)]
    pub delay_cache_until_active: bool,
    /// Serve pprof-style profiling handlers (kept for compatibility; upstream default true).
    #[serde(default = "default_true")]
    pub enable_profiling: bool,
    /// Lock contention profiling; unset means "same as enableProfiling".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_contention_profiling: Option<bool>,
}

impl Default for KubeSchedulerConfiguration {
    /// The configuration of an empty file (before profile defaults are applied).
    fn default() -> Self {
        Self {
            api_version: default_api_version(),
            kind: default_kind(),
            parallelism: DEFAULT_PARALLELISM,
            percentage_of_nodes_to_score: DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE,
            pod_initial_backoff_seconds: DEFAULT_POD_INITIAL_BACKOFF_SECONDS,
            pod_max_backoff_seconds: DEFAULT_POD_MAX_BACKOFF_SECONDS,
            leader_election: LeaderElectionConfiguration::default(),
            client_connection: ClientConnectionConfiguration::default(),
            profiles: Vec::new(),
            extenders: Vec::new(),
            delay_cache_until_active: false,
            enable_profiling: true,
            enable_contention_profiling: None,
        }
    }
}

/// Leader election settings (component-base's LeaderElectionConfiguration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionConfiguration {
    /// Run leader election before scheduling.
    #[serde(default = "default_true")]
    pub leader_elect: bool,
    /// How long a non-leader waits before trying to take the lease.
    #[serde(default, with = "serde_go")]
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up.
    #[serde(default, with = "serde_go")]
    pub renew_deadline: Duration,
    /// Wait between tries.
    #[serde(default, with = "serde_go")]
    pub retry_period: Duration,
    /// Lock object type; only `leases` is accepted.
    #[serde(default)]
    pub resource_lock: String,
    /// Lock object name.
    #[serde(default)]
    pub resource_name: String,
    /// Lock object namespace.
    #[serde(default)]
    pub resource_namespace: String,
}

impl Default for LeaderElectionConfiguration {
    /// Unset fields, as an absent `leaderElection` block decodes (defaults come later).
    fn default() -> Self {
        Self {
            leader_elect: true,
            lease_duration: Duration::ZERO,
            renew_deadline: Duration::ZERO,
            retry_period: Duration::ZERO,
            resource_lock: String::new(),
            resource_name: String::new(),
            resource_namespace: String::new(),
        }
    }
}

/// API client settings (component-base's ClientConnectionConfiguration).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientConnectionConfiguration {
    /// Path to a kubeconfig; empty means in-cluster or the usual lookup.
    #[serde(default)]
    pub kubeconfig: String,
    /// The `Accept` header sent to the API server.
    #[serde(default)]
    pub accept_content_types: String,
    /// The content type of requests.
    #[serde(default)]
    pub content_type: String,
    /// Queries per second allowed to the API server.
    #[serde(default)]
    pub qps: f32,
    /// Extra queries allowed in a burst.
    #[serde(default)]
    pub burst: i32,
}

/// One scheduling profile.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Profile {
    /// The name pods select the profile by (`spec.schedulerName`).
    #[serde(default)]
    pub scheduler_name: String,
    /// Overrides the global percentageOfNodesToScore for this profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Plugins enabled and disabled per extension point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<Plugins>,
    /// Per-plugin args.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugin_config: Vec<PluginConfig>,
}

/// Plugins per extension point, plus `multiPoint`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plugins {
    /// QueueSort.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub queue_sort: PluginSet,
    /// PreEnqueue.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub pre_enqueue: PluginSet,
    /// PreFilter.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub pre_filter: PluginSet,
    /// Filter.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub filter: PluginSet,
    /// PostFilter.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub post_filter: PluginSet,
    /// PreScore.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub pre_score: PluginSet,
    /// Score.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub score: PluginSet,
    /// Reserve.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub reserve: PluginSet,
    /// Permit.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub permit: PluginSet,
    /// PreBind.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub pre_bind: PluginSet,
    /// Bind.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub bind: PluginSet,
    /// PostBind.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub post_bind: PluginSet,
    /// PlacementGenerate (TopologyAwareWorkloadScheduling).
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub placement_generate: PluginSet,
    /// PlacementScore (TopologyAwareWorkloadScheduling), with weights.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub placement_score: PluginSet,
    /// Plugins enabled at every point they implement.
    #[serde(default, skip_serializing_if = "PluginSet::is_empty")]
    pub multi_point: PluginSet,
}

/// Which set a [`Plugins`] field is: one extension point, or `multiPoint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SetKey {
    /// `multiPoint`.
    MultiPoint,
    /// One extension point.
    Point(kubesched_framework::ExtensionPoint),
}

impl SetKey {
    /// `multiPoint` first, then every configurable point in upstream's order.
    pub fn all() -> impl Iterator<Item = SetKey> {
        std::iter::once(SetKey::MultiPoint).chain(
            kubesched_framework::ExtensionPoint::CONFIGURABLE
                .into_iter()
                .map(SetKey::Point),
        )
    }

    /// The camelCase key in a `plugins` block.
    pub fn config_key(&self) -> &'static str {
        match self {
            SetKey::MultiPoint => "multiPoint",
            SetKey::Point(p) => p.config_key(),
        }
    }
}

impl Plugins {
    /// The set of `key`.
    pub fn set(&self, key: SetKey) -> &PluginSet {
        use kubesched_framework::ExtensionPoint as P;
        match key {
            SetKey::MultiPoint => &self.multi_point,
            SetKey::Point(p) => match p {
                P::QueueSort => &self.queue_sort,
                P::PreEnqueue => &self.pre_enqueue,
                P::PreFilter => &self.pre_filter,
                P::Filter => &self.filter,
                P::PostFilter => &self.post_filter,
                P::PreScore => &self.pre_score,
                P::Score => &self.score,
                P::Reserve => &self.reserve,
                P::Permit => &self.permit,
                P::PreBind => &self.pre_bind,
                P::Bind => &self.bind,
                P::PostBind => &self.post_bind,
                P::PlacementGenerate => &self.placement_generate,
                P::PlacementScore => &self.placement_score,
                // Not configurable: no file names it, so it is always the empty set.
                P::EnqueueExtensions => &EMPTY_SET,
            },
        }
    }

    /// The set of `key`, mutable. `None` for EnqueueExtensions, which is not configurable.
    pub fn set_mut(&mut self, key: SetKey) -> Option<&mut PluginSet> {
        use kubesched_framework::ExtensionPoint as P;
        Some(match key {
            SetKey::MultiPoint => &mut self.multi_point,
            SetKey::Point(p) => match p {
                P::QueueSort => &mut self.queue_sort,
                P::PreEnqueue => &mut self.pre_enqueue,
                P::PreFilter => &mut self.pre_filter,
                P::Filter => &mut self.filter,
                P::PostFilter => &mut self.post_filter,
                P::PreScore => &mut self.pre_score,
                P::Score => &mut self.score,
                P::Reserve => &mut self.reserve,
                P::Permit => &mut self.permit,
                P::PreBind => &mut self.pre_bind,
                P::Bind => &mut self.bind,
                P::PostBind => &mut self.post_bind,
                P::PlacementGenerate => &mut self.placement_generate,
                P::PlacementScore => &mut self.placement_score,
                P::EnqueueExtensions => return None,
            },
        })
    }

    /// Every plugin name enabled in any set, sorted and deduplicated.
    pub fn enabled_names(&self) -> std::collections::BTreeSet<String> {
        SetKey::all()
            .flat_map(|k| self.set(k).enabled.iter().map(|e| e.name.clone()))
            .collect()
    }
}

static EMPTY_SET: PluginSet = PluginSet {
    enabled: Vec::new(),
    disabled: Vec::new(),
};

/// Enabled and disabled plugins of one set. `disabled` may hold `*` (every default plugin).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSet {
    /// Plugins to enable, in order (after the defaults that remain).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enabled: Vec<PluginEntry>,
    /// Default plugins to disable; `*` disables them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<PluginEntry>,
}

impl PluginSet {
    /// Neither enabled nor disabled plugins.
    pub fn is_empty(&self) -> bool {
        self.enabled.is_empty() && self.disabled.is_empty()
    }

    /// Whether `disabled` names `name` or `*`.
    pub fn disables(&self, name: &str) -> bool {
        self.disabled
            .iter()
            .any(|d| d.name == name || d.name == "*")
    }
}

/// One plugin in a set.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginEntry {
    /// The plugin's registered name.
    pub name: String,
    /// Score weight (Score and multiPoint only); unset or 0 means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

impl PluginEntry {
    /// An entry without a weight.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            weight: None,
        }
    }

    /// An entry with a weight.
    pub fn weighted(name: &str, weight: i32) -> Self {
        Self {
            name: name.to_string(),
            weight: Some(weight),
        }
    }
}

/// Args of one plugin.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginConfig {
    /// The plugin's name.
    pub name: String,
    /// Its args object (decoded by the plugin's registered codec).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "type_meta_first"
    )]
    pub args: Option<serde_json::Value>,
}

/// Writes an args object with `apiVersion` and `kind` first, as Kubernetes objects read.
fn type_meta_first<S: serde::Serializer>(
    args: &Option<serde_json::Value>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let Some(serde_json::Value::Object(map)) = args else {
        return args.serialize(s);
    };
    const HEAD: [&str; 2] = ["apiVersion", "kind"];
    let mut out = s.serialize_map(Some(map.len()))?;
    for key in HEAD {
        if let Some(v) = map.get(key) {
            out.serialize_entry(key, v)?;
        }
    }
    for (k, v) in map.iter().filter(|(k, _)| !HEAD.contains(&k.as_str())) {
        out.serialize_entry(k, v)?;
    }
    out.end()
}

/// An HTTP scheduler extender.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Extender {
    /// Base URL of the extender.
    #[serde(rename = "urlPrefix", default)]
    pub url_prefix: String,
    /// Verb of the filter call; empty: not supported.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub filter_verb: String,
    /// Verb of the preempt call; empty: not supported.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preempt_verb: String,
    /// Verb of the prioritize call; empty: not supported.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prioritize_verb: String,
    /// Multiplier of the prioritize scores; must be positive when prioritizeVerb is set.
    #[serde(default)]
    pub weight: i64,
    /// Verb of the bind call; at most one extender may bind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bind_verb: String,
    /// Use https.
    #[serde(rename = "enableHTTPS", default, skip_serializing_if = "is_false")]
    pub enable_https: bool,
    /// TLS settings.
    #[serde(rename = "tlsConfig", default, skip_serializing_if = "Option::is_none")]
    pub tls_config: Option<ExtenderTlsConfig>,
    /// Timeout of one call; zero means [`DEFAULT_EXTENDER_HTTP_TIMEOUT`].
    #[serde(
        rename = "httpTimeout",
        default,
        with = "serde_go",
        skip_serializing_if = "is_zero_duration"
    )]
    pub http_timeout: Duration,
    /// The extender caches node information, so only node names are sent.
    #[serde(default, skip_serializing_if = "is_false")]
    pub node_cache_capable: bool,
    /// Extended resources the extender manages.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_resources: Vec<ExtenderManagedResource>,
    /// Failures of this extender do not fail scheduling.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignorable: bool,
}

/// TLS settings of an extender. Byte fields hold base64 text, as in the file.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderTlsConfig {
    /// Skip server certificate verification (testing only).
    #[serde(default, skip_serializing_if = "is_false")]
    pub insecure: bool,
    /// Server name for SNI and verification.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server_name: String,
    /// Client certificate file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cert_file: String,
    /// Client key file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key_file: String,
    /// CA bundle file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_file: String,
    /// Client certificate, PEM, base64.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cert_data: String,
    /// Client key, PEM, base64.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key_data: String,
    /// CA bundle, PEM, base64.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_data: String,
}

/// An extended resource an extender manages.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtenderManagedResource {
    /// The extended resource name, e.g. `example.com/foo`.
    pub name: String,
    /// The scheduler's NodeResourcesFit ignores this resource.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ignored_by_scheduler: bool,
}
