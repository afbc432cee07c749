//! kubesched-config: the KubeSchedulerConfiguration file (`kubescheduler.config.k8s.io/v1`,
//! and `v1beta3` — removed upstream, refused by kube-scheduler v1.34 — still read with the
//! same shape, with a warning and [`migrate_to_v1`] to rewrite it).
//!
//! It owns decoding (YAML or JSON, strict, errors naming the file and the field path),
//! upstream's defaults (scalars, the default profile's plugins and weights, default plugin
//! args), upstream's validation rules, and the resolution of each profile into a
//! [`ProfileSpec`] (defaults merged, `multiPoint` expanded) that the framework builds from.
//! It knows plugins only through the framework's link-time registry: it must not depend on
//! plugin crates, build plugins, or talk to a cluster.

mod decode;
pub use kubesched_framework::duration;
mod error;
pub mod input;
mod plugins;
mod types;
mod validation;

use std::collections::HashSet;
use std::path::Path;

pub use error::{ConfigError, FieldError};
pub use kubesched_framework::{FeatureGates, PluginRef, ProfileSpec};
pub use plugins::{
    DEFAULT_PLUGINS, DefaultPlugin, MAX_WEIGHT, NODE_RESOURCES_FIT, REMOVED_PLUGINS,
    UPSTREAM_PLUGINS, default_multi_point,
};
pub use types::*;

/// A loaded, defaulted and validated configuration, ready to build frameworks.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The configuration with every default filled in (what `kubesched config defaults`
    /// prints): merged plugins per profile and the effective args of every plugin that takes
    /// args. Its apiVersion is v1 whatever version was read.
    pub config: KubeSchedulerConfiguration,
    /// One per profile, in order: plugins per extension point with multiPoint expanded.
    pub profiles: Vec<ProfileSpec>,
    /// Upstream default plugins that are not compiled into this binary (left out of the
    /// default profile; the binary reports them at start-up).
    pub absent_default_plugins: Vec<String>,
    /// The feature gates in effect (v1.37's defaults, or those of `--emulated-version`,
    /// unless `--feature-gates` set some).
    /// Not part of the file: upstream takes them on the command line only.
    pub feature_gates: FeatureGates,
    /// Settings the file holds that kubesched accepts but that change nothing or are going
    /// away (a v1beta3 apiVersion, profiling, protobuf content types), each naming the file
    /// and the field. The binary prints them.
    pub warnings: Vec<String>,
}

impl LoadedConfig {
    /// The resolved profile whose schedulerName is `name`.
    pub fn profile(&self, name: &str) -> Option<&ProfileSpec> {
        self.profiles.iter().find(|p| p.scheduler_name == name)
    }
}

/// Reads, defaults and validates a configuration file. Errors name the file as given; a
/// path that is not a regular file (`/dev/zero`, a pipe) or a file over
/// [`input::MAX_CONFIG_BYTES`] is refused without being read.
pub fn load_file(path: &Path) -> Result<LoadedConfig, ConfigError> {
    load_file_with_gates(path, &FeatureGates::defaults())
}

/// [`load_file`] under the feature gates in effect: a default plugin upstream adds only
/// under a gate (NodeDeclaredFeatures) is left out of the defaults when its gate is off.
pub fn load_file_with_gates(
    path: &Path,
    gates: &FeatureGates,
) -> Result<LoadedConfig, ConfigError> {
    let file = path.display().to_string();
    let text = input::read_text_file(path, input::MAX_CONFIG_BYTES).map_err(|source| {
        ConfigError::Read {
            file: file.clone(),
            source,
        }
    })?;
    load_str_with_gates(&text, &file, gates)
}

/// Decodes, defaults and validates a configuration held in memory; `source` names it in
/// errors (usually the file name). Every validation problem is reported, not just the first.
pub fn load_str(text: &str, source: &str) -> Result<LoadedConfig, ConfigError> {
    load_str_with_gates(text, source, &FeatureGates::defaults())
}

/// [`load_str`] under the feature gates in effect (see [`load_file_with_gates`]).
pub fn load_str_with_gates(
    text: &str,
    source: &str,
    gates: &FeatureGates,
) -> Result<LoadedConfig, ConfigError> {
    let cfg = decode::decode(text).map_err(|error| ConfigError::Decode {
        file: source.to_string(),
        error,
    })?;
    let (mut loaded, problems) = resolve(cfg, gates);
    if problems.is_empty() {
        loaded.warnings = decode::warnings(text)
            .into_iter()
            .map(|w| format!("{source}: {w}"))
            .collect();
        Ok(loaded)
    } else {
        Err(ConfigError::Invalid {
            file: source.to_string(),
            problems,
        })
    }
}

/// The v1 form of a configuration (v1beta3 or v1), for `kubesched config migrate`: the
/// document is first loaded as [`load_str`] does (so a broken one is refused with the same
/// errors), then written as YAML with apiVersion `kubescheduler.config.k8s.io/v1` (plugin
/// args included). Loading the result gives the same configuration.
pub fn migrate_to_v1(text: &str, source: &str) -> Result<String, ConfigError> {
    load_str(text, source)?;
    decode::migrate_to_v1(text).map_err(|error| ConfigError::Decode {
        file: source.to_string(),
        error,
    })
}

/// Upstream's default configuration for this build: one profile `default-scheduler` with the
/// upstream default plugins that are compiled in.
pub fn default_config() -> LoadedConfig {
    default_config_with_gates(&FeatureGates::defaults())
}

/// [`default_config`] under the feature gates in effect (see [`load_file_with_gates`]).
pub fn default_config_with_gates(gates: &FeatureGates) -> LoadedConfig {
    let (loaded, problems) = resolve(KubeSchedulerConfiguration::default(), gates);
    // Only a plugin whose own default args do not decode can get here: say so, keep going.
    for p in problems {
        tracing::error!(problem = %p, "the default configuration has a problem");
    }
    loaded
}

/// The configuration as YAML (for `kubesched config defaults` and `/configz`).
pub fn to_yaml(config: &KubeSchedulerConfiguration) -> String {
    // The types hold only strings, numbers, booleans, sequences and string-keyed maps, which
    // YAML can always represent.
    serde_saphyr::to_string(config).expect("a configuration always serializes to YAML")
}

/// Fills every default in, resolves the profiles and validates; returns the problems found.
fn resolve(
    mut cfg: KubeSchedulerConfiguration,
    gates: &FeatureGates,
) -> (LoadedConfig, Vec<FieldError>) {
    let mut problems = Vec::new();
    if cfg.api_version == API_VERSION_V1BETA3 {
        tracing::debug!("reading a v1beta3 configuration as v1");
    }
    cfg.api_version = API_VERSION_V1.to_string();
    cfg.kind = KIND.to_string();
    apply_scalar_defaults(&mut cfg);
    validation::validate_globals(&cfg, &mut problems);

    if cfg.profiles.is_empty() {
        cfg.profiles.push(Profile::default());
    }
    // Only a lone profile gets the default name; several must each name themselves.
    if let [only] = cfg.profiles.as_mut_slice()
        && only.scheduler_name.is_empty()
    {
        only.scheduler_name = DEFAULT_SCHEDULER_NAME.to_string();
    }
    let (defaults, absent) = plugins::default_multi_point(gates);
    // The extenders' ignoredByScheduler resources go into NodeResourcesFit's args before
    // they are decoded, so the one decode sees them.
    let ignored: Vec<String> = cfg
        .extenders
        .iter()
        .flat_map(|e| &e.managed_resources)
        .filter(|r| r.ignored_by_scheduler)
        .map(|r| r.name.clone())
        .collect();
    let mut resolved_profiles = Vec::with_capacity(cfg.profiles.len());
    let mut specs = Vec::with_capacity(cfg.profiles.len());
    for (i, profile) in cfg.profiles.iter().enumerate() {
        let r = plugins::resolve_profile(i, profile, &defaults, &ignored, gates, &mut problems);
        resolved_profiles.push(r.profile);
        specs.push(r.spec);
    }
    cfg.profiles = resolved_profiles;
    validation::validate_profiles(&cfg, &specs, &mut problems);
    validation::validate_extenders(&cfg.extenders, &mut problems);

    let mut seen = HashSet::new();
    problems.retain(|p| seen.insert((p.path.clone(), p.message.clone())));
    let loaded = LoadedConfig {
        config: cfg,
        profiles: specs,
        absent_default_plugins: absent,
        feature_gates: gates.clone(),
        warnings: Vec::new(),
    };
    (loaded, problems)
}

/// Upstream's scalar defaults (v1 defaults.go and component-base's recommended leader
/// election settings). Values upstream treats as unset when zero are defaulted when zero.
fn apply_scalar_defaults(cfg: &mut KubeSchedulerConfiguration) {
    let le = &mut cfg.leader_election;
    if le.resource_lock.is_empty() {
        le.resource_lock = DEFAULT_RESOURCE_LOCK.to_string();
    }
    if le.resource_namespace.is_empty() {
        le.resource_namespace = DEFAULT_LOCK_NAMESPACE.to_string();
    }
    if le.resource_name.is_empty() {
        le.resource_name = DEFAULT_LOCK_NAME.to_string();
    }
    if le.lease_duration.is_zero() {
        le.lease_duration = DEFAULT_LEASE_DURATION;
    }
    if le.renew_deadline.is_zero() {
        le.renew_deadline = DEFAULT_RENEW_DEADLINE;
    }
    if le.retry_period.is_zero() {
        le.retry_period = DEFAULT_RETRY_PERIOD;
    }
    let cc = &mut cfg.client_connection;
    if cc.content_type.is_empty() {
        cc.content_type = DEFAULT_CONTENT_TYPE.to_string();
    }
    if cc.qps == 0.0 {
        cc.qps = DEFAULT_QPS;
    }
    if cc.burst == 0 {
        cc.burst = DEFAULT_BURST;
    }
    if cfg.enable_contention_profiling.is_none() {
        cfg.enable_contention_profiling = Some(cfg.enable_profiling);
    }
}
