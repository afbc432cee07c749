//! Profile plugins: upstream's default plugin list, merging a profile's plugins into it
//! (`mergePluginSet`), default plugin args, and the expansion of `multiPoint` into the plugin
//! list of every extension point (`expandMultiPointPlugins`), giving a [`ProfileSpec`].

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use kubesched_framework::registry::{self, DecodedArgs, SourcedArgs};
use kubesched_framework::{
    ExtensionPoint, Feature, FeatureGates, PluginRef, PointSet, ProfileSpec,
};

use crate::error::FieldError;
use crate::types::{PluginConfig, PluginEntry, PluginSet, Plugins, Profile, SetKey};

/// One plugin of upstream's default profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DefaultPlugin {
    /// The plugin name.
    pub name: &'static str,
    /// Its score weight in the default profile, if it sets one.
    pub weight: Option<i32>,
    /// The feature gate upstream's `applyFeatureGates` adds it under, if any: off (as at
    /// `--emulated-version` 1.34 or 1.35 for NodeDeclaredFeatures), the plugin is not a
    /// default.
    pub gate: Option<Feature>,
}

const fn plugin(name: &'static str, weight: Option<i32>) -> DefaultPlugin {
    DefaultPlugin {
        name,
        weight,
        gate: None,
    }
}

const fn gated(name: &'static str, gate: Feature) -> DefaultPlugin {
    DefaultPlugin {
        name,
        weight: None,
        gate: Some(gate),
    }
}

/// Upstream v1's default `multiPoint` list, in order, with the plugins its default feature
/// gates add (SchedulingGates first; DynamicResources just before DefaultPreemption, since
/// DynamicResourceAllocation is on by default; NodeDeclaredFeatures appended after the
/// list, under its gate, as v1.37's `applyFeatureGates` adds it before DynamicResources is
/// inserted; GangScheduling appended under GenericWorkload, then TopologyPlacement and
/// PodGroupPodsCount under TopologyAwareWorkloadScheduling).
pub const DEFAULT_PLUGINS: &[DefaultPlugin] = &[
    plugin("SchedulingGates", None),
    plugin("PrioritySort", None),
    plugin("NodeUnschedulable", None),
    plugin("NodeName", None),
    plugin("TaintToleration", Some(3)),
    plugin("NodeAffinity", Some(2)),
    plugin("NodePorts", None),
    plugin("NodeResourcesFit", Some(1)),
    plugin("VolumeRestrictions", None),
    plugin("NodeVolumeLimits", None),
    plugin("VolumeBinding", None),
    plugin("VolumeZone", None),
    plugin("PodTopologySpread", Some(2)),
    plugin("InterPodAffinity", Some(2)),
    plugin("DynamicResources", None),
    plugin("DefaultPreemption", None),
    plugin("NodeResourcesBalancedAllocation", Some(1)),
    plugin("ImageLocality", Some(1)),
    plugin("DefaultBinder", None),
    gated("NodeDeclaredFeatures", Feature::NodeDeclaredFeatures),
    gated("GangScheduling", Feature::GenericWorkload),
    gated(
        "TopologyPlacement",
        Feature::TopologyAwareWorkloadScheduling,
    ),
    gated(
        "PodGroupPodsCount",
        Feature::TopologyAwareWorkloadScheduling,
    ),
];

/// Plugins upstream removed; configurations naming them are refused as upstream does.
pub const REMOVED_PLUGINS: &[&str] = &[
    "AzureDiskLimits",
    "CinderLimits",
    "EBSLimits",
    "GCEPDLimits",
];

/// Every plugin of upstream kube-scheduler v1.34's in-tree registry, NodeDeclaredFeatures
/// and GangScheduling (registered upstream from v1.35), and TopologyPlacement and
/// PodGroupPodsCount (from v1.36).
pub const UPSTREAM_PLUGINS: &[&str] = &[
    "DefaultBinder",
    "DefaultPreemption",
    "DynamicResources",
    "GangScheduling",
    "ImageLocality",
    "InterPodAffinity",
    "NodeAffinity",
    "NodeDeclaredFeatures",
    "NodeName",
    "NodePorts",
    "NodeResourcesBalancedAllocation",
    "NodeResourcesFit",
    "NodeUnschedulable",
    "NodeVolumeLimits",
    "PodGroupPodsCount",
    "PodTopologySpread",
    "PrioritySort",
    "SchedulingGates",
    "TaintToleration",
    "TopologyPlacement",
    "VolumeBinding",
    "VolumeRestrictions",
    "VolumeZone",
];

/// The highest score weight a configuration may give.
pub const MAX_WEIGHT: i32 = 100;

/// The extension points a compiled-in plugin implements, or one a plugin source builds under
/// this name (see [`sourced`]).
fn points_of(name: &str, sourced: &Sourced) -> Option<PointSet> {
    registry::find(name)
        .map(|d| d.extension_points())
        .or_else(|| {
            sourced
                .get(name)
                .and_then(|p| p.as_ref().ok().map(|s| s.points))
        })
}

/// Plugins of a profile that a [`registry::PluginSource`] builds under their configured name,
/// with their args as the source decoded them (once, here) or why they are refused.
type Sourced = BTreeMap<String, Result<SourcedArgs, String>>;

/// The profile's `pluginConfig` entries whose name is not registered and whose args a plugin
/// source claims (a WebAssembly guest named by its `guestURL`, with `plugin-wasm`).
fn sourced(profile: &Profile) -> Sourced {
    profile
        .plugin_config
        .iter()
        .filter(|pc| registry::find(&pc.name).is_none())
        .filter_map(|pc| {
            let args = pc.args.as_ref()?;
            let source = registry::source_for(Some(args))?;
            Some((
                pc.name.clone(),
                (source.decode)(args).map_err(|e| e.message),
            ))
        })
        .collect()
}

/// The default `multiPoint` set of this build under `gates` (upstream's defaults whose gate
/// is on that are compiled in) and the upstream defaults that are not compiled in.
pub fn default_multi_point(gates: &FeatureGates) -> (PluginSet, Vec<String>) {
    let mut set = PluginSet::default();
    let mut absent = Vec::new();
    for d in DEFAULT_PLUGINS {
        if d.gate.is_some_and(|g| !gates.enabled(g)) {
            continue;
        }
        if registry::find(d.name).is_some() {
            set.enabled.push(PluginEntry {
                name: d.name.to_string(),
                weight: d.weight,
            });
        } else {
            absent.push(d.name.to_string());
        }
    }
    (set, absent)
}

/// A plugin of a merged set, with its index in the user's `enabled` list when it came from
/// there (so problems can name the user's entry).
#[derive(Debug, Clone)]
struct Merged {
    entry: PluginEntry,
    origin: Option<usize>,
}

/// A set after the user's settings were merged into the defaults.
#[derive(Debug, Clone, Default)]
struct MergedSet {
    enabled: Vec<Merged>,
    disabled: Vec<String>,
}

impl MergedSet {
    fn disables(&self, name: &str) -> bool {
        self.disabled.iter().any(|d| d == name)
    }

    fn disables_all(&self) -> bool {
        self.disables("*")
    }

    fn to_plugin_set(&self) -> PluginSet {
        PluginSet {
            enabled: self.enabled.iter().map(|m| m.entry.clone()).collect(),
            disabled: self.disabled.iter().map(|n| PluginEntry::new(n)).collect(),
        }
    }
}

/// Upstream's `mergePluginSet`: drop disabled defaults (all of them with `*`), replace
/// re-configured defaults in place, append the other custom plugins in their order.
fn merge_set(defaults: &PluginSet, custom: &PluginSet) -> MergedSet {
    let disabled: Vec<String> = custom
        .disabled
        .iter()
        .chain(&defaults.disabled)
        .map(|p| p.name.clone())
        .collect();
    let disabled_set: HashSet<&str> = disabled.iter().map(String::as_str).collect();
    // The last of duplicate custom entries replaces the default; the others are appended and
    // then refused as duplicates during expansion, as upstream does.
    let custom_index: HashMap<&str, usize> = custom
        .enabled
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.as_str(), i))
        .collect();
    let mut replaced = HashSet::new();
    let mut enabled = Vec::new();
    if !disabled_set.contains("*") {
        for d in &defaults.enabled {
            if disabled_set.contains(d.name.as_str()) {
                continue;
            }
            match custom_index.get(d.name.as_str()) {
                Some(&i) => {
                    tracing::debug!(plugin = %d.name, "default plugin is explicitly re-configured; overriding");
                    replaced.insert(i);
                    enabled.push(Merged {
                        entry: custom.enabled[i].clone(),
                        origin: Some(i),
                    });
                }
                None => enabled.push(Merged {
                    entry: d.clone(),
                    origin: None,
                }),
            }
        }
    }
    for (i, p) in custom.enabled.iter().enumerate() {
        if !replaced.contains(&i) {
            enabled.push(Merged {
                entry: p.clone(),
                origin: Some(i),
            });
        }
    }
    MergedSet { enabled, disabled }
}

fn set_path(profile: usize, key: SetKey) -> String {
    format!("profiles[{profile}].plugins.{}", key.config_key())
}

fn entry_path(profile: usize, key: SetKey, m: &Merged) -> String {
    match m.origin {
        Some(i) => format!("{}.enabled[{i}].name", set_path(profile, key)),
        None => set_path(profile, key),
    }
}

/// Go's interface name of a point in upstream's messages, e.g. `FilterPlugin`.
fn interface_name(point: ExtensionPoint) -> String {
    format!("{}Plugin", point.as_str())
}

/// What resolving one profile's plugins gives.
pub(crate) struct ResolvedProfile {
    /// The profile with merged plugins and defaulted plugin args (what `config defaults` shows).
    pub profile: Profile,
    /// The framework's view of it.
    pub spec: ProfileSpec,
}

/// Checks the plugin names and weights the user wrote in profile `index`, before defaults are
/// merged in, so each problem names the user's own entry.
fn check_user_plugins(
    index: usize,
    profile: &Profile,
    sourced: &Sourced,
    problems: &mut Vec<FieldError>,
) {
    if let Some(plugins) = &profile.plugins {
        for key in SetKey::all() {
            let set = plugins.set(key);
            for (j, e) in set.enabled.iter().enumerate() {
                let base = format!("{}.enabled[{j}]", set_path(index, key));
                if let Some(msg) = profile_name_problem(profile, &e.name)
                    .filter(|_| !sourced.contains_key(&e.name))
                {
                    problems.push(FieldError::new(format!("{base}.name"), msg));
                }
                let weighs = matches!(
                    key,
                    SetKey::MultiPoint
                        | SetKey::Point(ExtensionPoint::Score | ExtensionPoint::PlacementScore)
                );
                if let (true, Some(w)) = (weighs, e.weight) {
                    // 0 is upstream's "unset" (it becomes 1), so it is accepted too.
                    if !(0..=MAX_WEIGHT).contains(&w) {
                        problems.push(FieldError::new(
                            format!("{base}.weight"),
                            format!("must be in the range 1..={MAX_WEIGHT}, got {w}"),
                        ));
                    }
                }
            }
            for (j, e) in set.disabled.iter().enumerate() {
                if e.name.is_empty() {
                    problems.push(FieldError::new(
                        format!("{}.disabled[{j}].name", set_path(index, key)),
                        "required value",
                    ));
                }
            }
        }
    }
}

/// The Cargo feature that runs WebAssembly guests (plugins/wasm).
const WASM_FEATURE: &str = "plugin-wasm";

/// `name_problem` for a plugin of `profile`: a name no plugin has whose `pluginConfig` args
/// carry a `guestURL` is a WebAssembly guest of a build without the feature that runs them.
fn profile_name_problem(profile: &Profile, name: &str) -> Option<String> {
    let problem = name_problem(name)?;
    let wasm_guest = registry::find(name).is_none()
        && profile.plugin_config.iter().any(|pc| {
            pc.name == name
                && pc
                    .args
                    .as_ref()
                    .is_some_and(|a| a.get("guestURL").is_some())
        });
    Some(if wasm_guest {
        format!(
            "plugin {name:?} is a WebAssembly guest (its args name a guestURL), which this build cannot run; rebuild kubesched with the Cargo feature {WASM_FEATURE:?}"
        )
    } else {
        problem
    })
}

/// Why a plugin name cannot be enabled or configured in this build, if it cannot.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("required value".into());
    }
    if name == "*" {
        return Some("\"*\" may only be used in a disabled list".into());
    }
    if REMOVED_PLUGINS.contains(&name) {
        return Some(format!(
            "plugin {name:?} was removed from kube-scheduler and is invalid in {:?}",
            crate::types::API_VERSION_V1
        ));
    }
    if registry::find(name).is_none() {
        let feature = registry::feature_for(name);
        let has_feature = registry::offered_features().contains(&feature.as_str());
        if UPSTREAM_PLUGINS.contains(&name) && !has_feature {
            return Some(format!(
                "plugin {name:?} is not implemented in kubesched yet; no Cargo feature adds it"
            ));
        }
        if !has_feature {
            // Not a plugin kubesched knows at all: most likely a typo.
            return Some(match nearest_plugin(name) {
                Some(near) => format!("plugin {name:?} does not exist; did you mean {near:?}?"),
                None => format!(
                    "plugin {name:?} does not exist (neither compiled in nor added by a Cargo feature)"
                ),
            });
        }
        return Some(format!(
            "plugin {name:?} is not compiled into this binary; rebuild kubesched with the Cargo feature {feature:?}"
        ));
    }
    None
}

/// The known plugin name closest to `name` (upstream's and the compiled-in ones), when it
/// is a few edits away, case aside.
fn nearest_plugin(name: &str) -> Option<String> {
    let lower = name.to_lowercase();
    let known = UPSTREAM_PLUGINS
        .iter()
        .map(|n| n.to_string())
        .chain(registry::plugins().into_iter().map(|d| d.name.to_string()));
    known
        .map(|k| (edit_distance(&lower, &k.to_lowercase()), k))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// Checks the user's plugins of profile `index` ([`check_user_plugins`]), merges them with
/// the defaults, decodes its plugin args (each once: the typed values go to the framework,
/// their effective forms to the printed configuration), and expands multiPoint. `ignored`
/// are the extenders' `ignoredByScheduler` resources, which replace NodeResourcesFit's
/// `ignoredResources` (upstream does this when it builds its extenders). Problems are
/// appended to `problems`.
pub(crate) fn resolve_profile(
    index: usize,
    profile: &Profile,
    defaults: &PluginSet,
    ignored: &[String],
    gates: &FeatureGates,
    problems: &mut Vec<FieldError>,
) -> ResolvedProfile {
    let sourced = sourced(profile);
    check_user_plugins(index, profile, &sourced, problems);
    let custom = profile.plugins.clone().unwrap_or_default();
    let mut merged: BTreeMap<SetKey, MergedSet> = BTreeMap::new();
    let empty = PluginSet::default();
    for key in SetKey::all() {
        let default_set = if key == SetKey::MultiPoint {
            defaults
        } else {
            &empty
        };
        merged.insert(key, merge_set(default_set, custom.set(key)));
    }
    let mut plugins = Plugins::default();
    for (key, set) in &merged {
        if let Some(slot) = plugins.set_mut(*key) {
            *slot = set.to_plugin_set();
        }
    }

    let (plugin_config, plugin_args) = resolve_plugin_config(
        &Resolving {
            index,
            profile,
            plugins: &plugins,
            sourced: &sourced,
            ignored,
            gates,
        },
        problems,
    );
    let points = expand(index, &merged, &sourced, problems);

    let resolved = Profile {
        scheduler_name: profile.scheduler_name.clone(),
        percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
        plugins: Some(plugins),
        plugin_config,
    };
    let spec = ProfileSpec {
        scheduler_name: profile.scheduler_name.clone(),
        plugins: points,
        plugin_args,
        percentage_of_nodes_to_score: profile.percentage_of_nodes_to_score,
    };
    ResolvedProfile {
        profile: resolved,
        spec,
    }
}

/// The plugin whose args get the extenders' `ignoredByScheduler` resources.
pub const NODE_RESOURCES_FIT: &str = "NodeResourcesFit";

/// What [`resolve_plugin_config`] works from.
struct Resolving<'a> {
    index: usize,
    profile: &'a Profile,
    plugins: &'a Plugins,
    sourced: &'a Sourced,
    ignored: &'a [String],
    gates: &'a FeatureGates,
}

impl Resolving<'_> {
    /// `profile "<name>"` for messages (`profiles[i]` when the profile has no name).
    fn profile_name(&self) -> String {
        if self.profile.scheduler_name.is_empty() {
            format!("profiles[{}]", self.index)
        } else {
            format!("profile {:?}", self.profile.scheduler_name)
        }
    }

    /// The raw args `name` is decoded from: as written, with the extenders' ignored
    /// resources in place of NodeResourcesFit's `ignoredResources`.
    fn raw_args<'v>(
        &self,
        name: &str,
        written: Option<&'v serde_json::Value>,
    ) -> Option<std::borrow::Cow<'v, serde_json::Value>> {
        if name != NODE_RESOURCES_FIT || self.ignored.is_empty() {
            return written.map(std::borrow::Cow::Borrowed);
        }
        let mut args = match written {
            Some(serde_json::Value::Object(m)) => m.clone(),
            // Anything else is refused by the decoder; leave it as written.
            Some(other) if !other.is_null() => return written.map(std::borrow::Cow::Borrowed),
            _ => serde_json::Map::new(),
        };
        args.insert("ignoredResources".into(), serde_json::json!(self.ignored));
        Some(std::borrow::Cow::Owned(serde_json::Value::Object(args)))
    }
}

/// Decodes every pluginConfig entry with its plugin's codec, once (reporting bad args with
/// their path, the profile and the plugin), replaces the args by their effective form, and
/// appends the default args of every enabled plugin that takes args and has no entry, as
/// upstream's defaulting does. Returns the defaulted list and the decoded args per plugin
/// for the framework.
fn resolve_plugin_config(
    r: &Resolving<'_>,
    problems: &mut Vec<FieldError>,
) -> (Vec<PluginConfig>, BTreeMap<String, DecodedArgs>) {
    let (index, profile) = (r.index, r.profile);
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(profile.plugin_config.len());
    let mut decoded_args = BTreeMap::new();
    for (j, pc) in profile.plugin_config.iter().enumerate() {
        let path = format!("profiles[{index}].pluginConfig[{j}]");
        if !seen.insert(pc.name.clone()) {
            problems.push(FieldError::new(
                format!("{path}.name"),
                format!("duplicate value {:?}", pc.name),
            ));
            continue;
        }
        if let Some(sourced) = r.sourced.get(&pc.name) {
            match sourced {
                Ok(s) => {
                    decoded_args.insert(pc.name.clone(), s.args.clone());
                }
                Err(msg) => problems.push(FieldError::new(
                    format!("{path}.args"),
                    format!("plugin {:?} of {}: {msg}", pc.name, r.profile_name()),
                )),
            }
            out.push(pc.clone());
            continue;
        }
        if let Some(msg) = profile_name_problem(profile, &pc.name) {
            problems.push(FieldError::new(format!("{path}.name"), msg));
            out.push(pc.clone());
            continue;
        }
        let Some(desc) = registry::find(&pc.name) else {
            continue;
        };
        let raw = r.raw_args(&pc.name, pc.args.as_ref());
        match (desc.args.decode)(raw.as_deref(), r.gates) {
            Ok(decoded) => {
                out.push(PluginConfig {
                    name: pc.name.clone(),
                    args: decoded.effective.clone().or_else(|| pc.args.clone()),
                });
                decoded_args.insert(pc.name.clone(), decoded);
            }
            Err(e) => {
                problems.push(FieldError::new(
                    format!("{path}.args"),
                    format!(
                        "plugin {:?} of {}: {}",
                        pc.name,
                        r.profile_name(),
                        e.message
                    ),
                ));
                out.push(pc.clone());
            }
        }
    }
    for name in r.plugins.enabled_names() {
        if seen.contains(&name) {
            continue;
        }
        let Some(desc) = registry::find(&name) else {
            continue;
        };
        if desc.args.kind.is_none() {
            continue;
        }
        match (desc.args.decode)(r.raw_args(&name, None).as_deref(), r.gates) {
            Ok(decoded) => {
                if let Some(effective) = &decoded.effective {
                    out.push(PluginConfig {
                        name: name.clone(),
                        args: Some(effective.clone()),
                    });
                }
                decoded_args.insert(name, decoded);
            }
            Err(e) => problems.push(FieldError::new(
                format!("profiles[{index}].pluginConfig"),
                format!(
                    "the default args of plugin {name:?} of {} do not decode: {e}",
                    r.profile_name()
                ),
            )),
        }
    }
    if !r.ignored.is_empty() && !out.iter().any(|pc| pc.name == NODE_RESOURCES_FIT) {
        // Upstream refuses to start such a profile (scheduler.New); here it is refused
        // when the file is read.
        problems.push(FieldError::new(
            format!("profiles[{index}].pluginConfig"),
            format!(
                "can't find NodeResourcesFitArgs in plugin config: the extenders mark {} ignoredByScheduler, which only NodeResourcesFit can ignore",
                r.ignored.join(", ")
            ),
        ));
    }
    (out, decoded_args)
}

/// Upstream's `expandMultiPointPlugins`, per configurable point: the point's own enabled list
/// is checked (implemented, no duplicates); with `disabled: *` at the point it stands alone;
/// otherwise multiPoint plugins implementing the point join, except those disabled there.
/// Order: multiPoint plugins the point re-configures (in the point's order), then the other
/// multiPoint plugins, then the point's remaining plugins.
fn expand(
    index: usize,
    merged: &BTreeMap<SetKey, MergedSet>,
    sourced: &Sourced,
    problems: &mut Vec<FieldError>,
) -> BTreeMap<ExtensionPoint, Vec<PluginRef>> {
    let empty = MergedSet::default();
    let multi = merged.get(&SetKey::MultiPoint).unwrap_or(&empty);
    let weights = score_weights(merged);
    let placement_weights = placement_score_weights(merged);
    let mut reported: HashSet<String> = HashSet::new();
    let mut out = BTreeMap::new();
    for point in ExtensionPoint::CONFIGURABLE {
        let key = SetKey::Point(point);
        let set = merged.get(&key).unwrap_or(&empty);
        let mut specific: Vec<&str> = Vec::new();
        for m in &set.enabled {
            let Some(points) = points_of(&m.entry.name, sourced) else {
                continue; // reported as not compiled in
            };
            if !points.contains(point) {
                problems.push(FieldError::new(
                    entry_path(index, key, m),
                    format!(
                        "plugin {:?} does not extend {}",
                        m.entry.name,
                        interface_name(point)
                    ),
                ));
                continue;
            }
            if specific.contains(&m.entry.name.as_str()) {
                problems.push(FieldError::new(
                    entry_path(index, key, m),
                    format!(
                        "plugin {:?} already registered as {:?}",
                        m.entry.name,
                        interface_name(point)
                    ),
                ));
                continue;
            }
            specific.push(&m.entry.name);
        }

        let names: Vec<&str> = if set.disables_all() {
            specific
        } else {
            let mut overridden: HashSet<&str> = HashSet::new();
            let mut from_multi: Vec<&str> = Vec::new();
            for m in &multi.enabled {
                let name = m.entry.name.as_str();
                let Some(points) = points_of(name, sourced) else {
                    continue;
                };
                if !points.contains(point) || set.disables(name) {
                    continue;
                }
                if specific.contains(&name) {
                    overridden.insert(name);
                    continue;
                }
                if from_multi.contains(&name) {
                    let path = entry_path(index, SetKey::MultiPoint, m);
                    if reported.insert(path.clone()) {
                        problems.push(FieldError::new(
                            path,
                            format!(
                                "plugin {name:?} already registered as {:?}",
                                interface_name(point)
                            ),
                        ));
                    }
                    continue;
                }
                from_multi.push(name);
            }
            let first: Vec<&str> = specific
                .iter()
                .copied()
                .filter(|n| overridden.contains(n))
                .collect();
            let rest = specific.iter().copied().filter(|n| !overridden.contains(n));
            first.into_iter().chain(from_multi).chain(rest).collect()
        };
        if names.is_empty() {
            continue;
        }
        let refs = names
            .into_iter()
            .map(|n| {
                if point == ExtensionPoint::Score {
                    PluginRef::weighted(n, weights.get(n).copied().unwrap_or(1))
                } else if point == ExtensionPoint::PlacementScore {
                    PluginRef::weighted(n, placement_weights.get(n).copied().unwrap_or(1))
                } else {
                    PluginRef::new(n)
                }
            })
            .collect();
        out.insert(point, refs);
    }
    out
}

/// Upstream's `getScoreWeights`: the Score point's entries first, then multiPoint's; the first
/// entry of a plugin decides, and an unset or zero weight is 1.
fn score_weights(merged: &BTreeMap<SetKey, MergedSet>) -> HashMap<String, i64> {
    let mut weights = HashMap::new();
    let sets = [SetKey::Point(ExtensionPoint::Score), SetKey::MultiPoint];
    for key in sets {
        let Some(set) = merged.get(&key) else {
            continue;
        };
        for m in &set.enabled {
            weights
                .entry(m.entry.name.clone())
                .or_insert_with(|| match m.entry.weight {
                    Some(w) if w != 0 => i64::from(w),
                    _ => 1,
                });
        }
    }
    weights
}

/// The PlacementScore weights: each plugin's entry at `placementScore` (an unset or zero
/// weight is 1, as upstream's defaults give both placement scorers weight 1).
/// multiPoint's weights are Score weights and do not carry over.
fn placement_score_weights(merged: &BTreeMap<SetKey, MergedSet>) -> HashMap<String, i64> {
    let mut weights = HashMap::new();
    if let Some(set) = merged.get(&SetKey::Point(ExtensionPoint::PlacementScore)) {
        for m in &set.enabled {
            weights
                .entry(m.entry.name.clone())
                .or_insert_with(|| match m.entry.weight {
                    Some(w) if w != 0 => i64::from(w),
                    _ => 1,
                });
        }
    }
    weights
}

#[cfg(test)]
mod tests {
    use super::*;

    // What a binary offering two plugin features registers (crates/cli's build script
    // writes this call from its Cargo.toml).
    kubesched_framework::register_plugin_features!("plugin-node-ports", "plugin-coscheduling");

    #[test]
    fn a_misspelled_plugin_gets_the_nearest_name_not_a_feature() {
        assert_eq!(
            name_problem("NodeResourceFit").as_deref(),
            Some("plugin \"NodeResourceFit\" does not exist; did you mean \"NodeResourcesFit\"?")
        );
        assert_eq!(
            name_problem("tainttoleration").as_deref(),
            Some("plugin \"tainttoleration\" does not exist; did you mean \"TaintToleration\"?")
        );
        assert_eq!(
            name_problem("MyVeryOwnPlugin").as_deref(),
            Some(
                "plugin \"MyVeryOwnPlugin\" does not exist (neither compiled in nor added by a Cargo feature)"
            )
        );
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "ab"), 2);
    }

    #[test]
    fn a_feature_is_named_only_when_the_binary_offers_it() {
        assert_eq!(
            registry::offered_features(),
            ["plugin-coscheduling", "plugin-node-ports"]
        );
        // No plugin is linked into this crate's unit tests, so every name is missing.
        assert_eq!(
            name_problem("NodePorts").as_deref(),
            Some(
                "plugin \"NodePorts\" is not compiled into this binary; rebuild kubesched with the Cargo feature \"plugin-node-ports\""
            )
        );
        assert_eq!(
            name_problem("Coscheduling").as_deref(),
            Some(
                "plugin \"Coscheduling\" is not compiled into this binary; rebuild kubesched with the Cargo feature \"plugin-coscheduling\""
            )
        );
        // An upstream plugin no offered feature adds is not implemented.
        assert_eq!(
            name_problem("NodeName").as_deref(),
            Some(
                "plugin \"NodeName\" is not implemented in kubesched yet; no Cargo feature adds it"
            )
        );
        // A name no feature adds is not sent to a feature that does not exist (a custom
        // plugin's crate adds its feature to crates/cli/Cargo.toml, and is then named).
        assert_eq!(
            name_problem("MyFilter").expect("missing"),
            "plugin \"MyFilter\" does not exist (neither compiled in nor added by a Cargo feature)"
        );
    }
}
