//! Fake plugins for the config tests. The config crate knows plugins only through the
//! registry, so each test binary registers fakes under the names it needs (real upstream
//! names where the defaults matter) with the extension points the real plugins declare.
#![allow(dead_code)] // each test binary uses a different part of this module

use kubesched_config::{ConfigError, LoadedConfig, ProfileSpec};
use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{ExtensionPoint, Plugin};
use serde::{Deserialize, Serialize};

/// A plugin object that does nothing: the config crate never builds plugins.
pub struct Fake(pub &'static str);

impl Plugin for Fake {
    fn name(&self) -> &str {
        self.0
    }
}

/// Registers a fake plugin: `fake_plugin!("Name", [Filter, Score]);` or with an args type:
/// `fake_plugin!("Name", [Filter], args: MyArgs);`.
#[macro_export]
macro_rules! fake_plugin {
    ($name:literal, [$($p:ident),* $(,)?]) => {
        kubesched_framework::register_plugin! {
            name: $name,
            extension_points: [$($p),*],
            factory: |_h: &kubesched_framework::Handle| -> Result<common::Fake, kubesched_framework::PluginError> {
                Ok(common::Fake($name))
            },
        }
    };
    ($name:literal, [$($p:ident),* $(,)?], args: $args:ty) => {
        kubesched_framework::register_plugin! {
            name: $name,
            extension_points: [$($p),*],
            args: $args,
            factory: |_a: &$args, _h: &kubesched_framework::Handle| -> Result<common::Fake, kubesched_framework::PluginError> {
                Ok(common::Fake($name))
            },
        }
    };
}

/// Registers fakes for every upstream default plugin, with the points the real ones implement.
#[macro_export]
macro_rules! register_upstream_defaults {
    () => {
        fake_plugin!("SchedulingGates", [PreEnqueue, EnqueueExtensions]);
        fake_plugin!("PrioritySort", [QueueSort]);
        fake_plugin!("NodeUnschedulable", [Filter, EnqueueExtensions]);
        fake_plugin!("NodeName", [Filter, EnqueueExtensions]);
        fake_plugin!("TaintToleration", [Filter, PreScore, Score, EnqueueExtensions]);
        fake_plugin!("NodeAffinity", [PreFilter, Filter, PreScore, Score, EnqueueExtensions]);
        fake_plugin!("NodePorts", [PreFilter, Filter, EnqueueExtensions]);
        fake_plugin!(
            "NodeResourcesFit",
            [PreFilter, Filter, PreScore, Score, EnqueueExtensions],
            args: common::FitArgs
        );
        fake_plugin!("VolumeRestrictions", [PreFilter, Filter, EnqueueExtensions]);
        fake_plugin!("NodeVolumeLimits", [PreFilter, Filter, EnqueueExtensions]);
        fake_plugin!(
            "VolumeBinding",
            [PreFilter, Filter, Reserve, PreBind, PreScore, Score, EnqueueExtensions]
        );
        fake_plugin!("VolumeZone", [PreFilter, Filter, EnqueueExtensions]);
        fake_plugin!(
            "PodTopologySpread",
            [PreFilter, Filter, PreScore, Score, EnqueueExtensions]
        );
        fake_plugin!(
            "InterPodAffinity",
            [PreFilter, Filter, PreScore, Score, EnqueueExtensions],
            args: common::InterPodAffinityArgs
        );
        fake_plugin!(
            "DynamicResources",
            [PreEnqueue, PreFilter, Filter, PostFilter, Reserve, PreBind, EnqueueExtensions]
        );
        fake_plugin!(
            "DefaultPreemption",
            [PreEnqueue, PostFilter, EnqueueExtensions],
            args: common::PreemptionArgs
        );
        fake_plugin!("NodeResourcesBalancedAllocation", [PreScore, Score]);
        fake_plugin!("ImageLocality", [Score]);
        fake_plugin!("DefaultBinder", [Bind]);
    };
}

/// One resource of a scoring strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceSpec {
    pub name: String,
    #[serde(default)]
    pub weight: i64,
}

/// The scoring strategy of the fake NodeResourcesFit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoringStrategy {
    #[serde(rename = "type", default = "least_allocated")]
    pub kind: String,
    #[serde(default)]
    pub resources: Vec<ResourceSpec>,
}

fn least_allocated() -> String {
    "LeastAllocated".into()
}

/// Args shaped like upstream's NodeResourcesFitArgs (the part the tests need).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FitArgs {
    #[serde(default = "default_strategy")]
    pub scoring_strategy: ScoringStrategy,
}

fn default_strategy() -> ScoringStrategy {
    let resource = |name: &str| ResourceSpec {
        name: name.into(),
        weight: 1,
    };
    ScoringStrategy {
        kind: least_allocated(),
        resources: vec![resource("cpu"), resource("memory")],
    }
}

impl Default for FitArgs {
    fn default() -> Self {
        Self {
            scoring_strategy: default_strategy(),
        }
    }
}

impl PluginArgs for FitArgs {
    const KIND: &'static str = "NodeResourcesFitArgs";
    fn validate(&self) -> Result<(), String> {
        for (i, r) in self.scoring_strategy.resources.iter().enumerate() {
            if !(1..=100).contains(&r.weight) {
                return Err(format!(
                    "scoringStrategy.resources[{i}].weight: must be in the range 1..=100"
                ));
            }
        }
        Ok(())
    }
}

/// Args shaped like upstream's InterPodAffinityArgs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InterPodAffinityArgs {
    #[serde(default = "one")]
    pub hard_pod_affinity_weight: i32,
    #[serde(default)]
    pub ignore_preferred_terms_of_existing_pods: bool,
}

fn one() -> i32 {
    1
}

impl Default for InterPodAffinityArgs {
    fn default() -> Self {
        Self {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false,
        }
    }
}

impl PluginArgs for InterPodAffinityArgs {
    const KIND: &'static str = "InterPodAffinityArgs";
    fn validate(&self) -> Result<(), String> {
        if !(0..=100).contains(&self.hard_pod_affinity_weight) {
            return Err("hardPodAffinityWeight: not in valid range [0-100]".into());
        }
        Ok(())
    }
}

/// Args shaped like upstream's DefaultPreemptionArgs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreemptionArgs {
    #[serde(default = "ten")]
    pub min_candidate_nodes_percentage: i32,
    #[serde(default = "hundred")]
    pub min_candidate_nodes_absolute: i32,
}

fn ten() -> i32 {
    10
}
fn hundred() -> i32 {
    100
}

impl Default for PreemptionArgs {
    fn default() -> Self {
        Self {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100,
        }
    }
}

impl PluginArgs for PreemptionArgs {
    const KIND: &'static str = "DefaultPreemptionArgs";
}

/// Loads a YAML document named `sched.yaml`.
pub fn load(yaml: &str) -> Result<LoadedConfig, ConfigError> {
    kubesched_config::load_str(yaml, "sched.yaml")
}

/// Loads a document that must be valid.
pub fn load_ok(yaml: &str) -> LoadedConfig {
    match load(yaml) {
        Ok(c) => c,
        Err(e) => panic!("config should load, got:\n{e}"),
    }
}

/// The full error text of a document that must be refused.
pub fn load_err(yaml: &str) -> String {
    match load(yaml) {
        Ok(c) => panic!("config should be refused, got {:#?}", c.profiles),
        Err(e) => e.to_string(),
    }
}

/// `name` or `name:weight` for every plugin of a point.
pub fn at(spec: &ProfileSpec, point: ExtensionPoint) -> Vec<String> {
    spec.at(point)
        .iter()
        .map(|r| {
            if point == ExtensionPoint::Score {
                format!("{}:{}", r.name, r.weight)
            } else {
                r.name.clone()
            }
        })
        .collect()
}

/// A compact listing of a profile: `Point: a, b:2, ...` per non-empty point, in upstream order.
pub fn listing(spec: &ProfileSpec) -> String {
    ExtensionPoint::CONFIGURABLE
        .into_iter()
        .filter(|p| !spec.at(*p).is_empty())
        .map(|p| format!("{}: {}", p.as_str(), at(spec, p).join(", ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A header for documents in tests.
pub const HEADER: &str =
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
