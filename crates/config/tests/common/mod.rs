//! Fake plugins for the config tests. The config crate knows plugins only through the
//! registry, so each test binary registers fakes under the names it needs (real upstream
//! names where the defaults matter) with the extension points the real plugins declare.
#![allow(dead_code)] // each test binary uses a different part of this module

use kubesched_config::{ConfigError, LoadedConfig, ProfileSpec};
use kubesched_framework::ExtensionPoint;
use kubesched_framework::registry::PluginArgs;
use serde::{Deserialize, Serialize};

/// Implements one extension point's trait for a fake plugin type, doing nothing: the
/// config crate never runs plugins, it only reads the points they implement.
#[macro_export]
macro_rules! fake_side {
    ($t:ident, QueueSort) => {
        impl kubesched_framework::QueueSortPlugin for $t {
            fn less(
                &self,
                _: &kubesched_framework::QueuedPodInfo,
                _: &kubesched_framework::QueuedPodInfo,
            ) -> bool {
                false
            }
        }
    };
    ($t:ident, PreEnqueue) => {
        impl kubesched_framework::PreEnqueuePlugin for $t {
            fn pre_enqueue(
                &self,
                _: &kubesched_framework::model::PodInfo,
            ) -> kubesched_framework::Status {
                kubesched_framework::Status::success()
            }
        }
    };
    ($t:ident, PreFilter) => {
        impl kubesched_framework::PreFilterPlugin for $t {
            fn pre_filter(
                &self,
                _: &mut kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &[std::sync::Arc<kubesched_framework::model::NodeInfo>],
            ) -> (
                Option<kubesched_framework::PreFilterResult>,
                kubesched_framework::Status,
            ) {
                (None, kubesched_framework::Status::success())
            }
        }
    };
    ($t:ident, Filter) => {
        impl kubesched_framework::FilterPlugin for $t {
            fn filter(
                &self,
                _: &kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &kubesched_framework::model::NodeInfo,
            ) -> kubesched_framework::Status {
                kubesched_framework::Status::success()
            }
        }
    };
    ($t:ident, PostFilter) => {
        #[kubesched_framework::async_trait]
        impl kubesched_framework::PostFilterPlugin for $t {
            async fn post_filter(
                &self,
                _: &kubesched_framework::Framework,
                _: &kubesched_framework::CycleState,
                _: &std::sync::Arc<kubesched_framework::model::PodInfo>,
                _: &kubesched_framework::NodeToStatus,
            ) -> (
                Option<kubesched_framework::PostFilterResult>,
                kubesched_framework::Status,
            ) {
                (None, kubesched_framework::Status::unschedulable("fake"))
            }
        }
    };
    ($t:ident, PreScore) => {
        impl kubesched_framework::PreScorePlugin for $t {
            fn pre_score(
                &self,
                _: &mut kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &[std::sync::Arc<kubesched_framework::model::NodeInfo>],
            ) -> kubesched_framework::Status {
                kubesched_framework::Status::success()
            }
        }
    };
    ($t:ident, Score) => {
        impl kubesched_framework::ScorePlugin for $t {
            fn score(
                &self,
                _: &kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &kubesched_framework::model::NodeInfo,
            ) -> Result<i64, kubesched_framework::Status> {
                Ok(0)
            }
        }
    };
    ($t:ident, Reserve) => {
        impl kubesched_framework::ReservePlugin for $t {
            fn reserve(
                &self,
                _: &mut kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &str,
            ) -> kubesched_framework::Status {
                kubesched_framework::Status::success()
            }
            fn unreserve(
                &self,
                _: &mut kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &str,
            ) {
            }
        }
    };
    ($t:ident, Permit) => {
        impl kubesched_framework::PermitPlugin for $t {
            fn permit(
                &self,
                _: &kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &str,
            ) -> (kubesched_framework::Status, std::time::Duration) {
                (
                    kubesched_framework::Status::success(),
                    std::time::Duration::ZERO,
                )
            }
        }
    };
    ($t:ident, PreBind) => {
        #[kubesched_framework::async_trait]
        impl kubesched_framework::PreBindPlugin for $t {
            async fn pre_bind(
                &self,
                _: &kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &str,
            ) -> kubesched_framework::Status {
                kubesched_framework::Status::skip()
            }
        }
    };
    ($t:ident, Bind) => {
        #[kubesched_framework::async_trait]
        impl kubesched_framework::BindPlugin for $t {
            async fn bind(
                &self,
                _: &kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &str,
            ) -> kubesched_framework::Status {
                kubesched_framework::Status::skip()
            }
        }
    };
    ($t:ident, PostBind) => {
        impl kubesched_framework::PostBindPlugin for $t {
            fn post_bind(
                &self,
                _: &kubesched_framework::CycleState,
                _: &kubesched_framework::model::PodInfo,
                _: &str,
            ) {
            }
        }
    };
    ($t:ident, EnqueueExtensions) => {
        impl kubesched_framework::EnqueueExtensions for $t {
            fn events_to_register(&self) -> Vec<kubesched_framework::events::ClusterEventWithHint> {
                Vec::new()
            }
        }
    };
}

/// Registers a fake plugin: `fake_plugin!("Name", [Filter, Score]);` or with an args type:
/// `fake_plugin!("Name", [Filter], args: MyArgs);`. Each fake is its own type implementing
/// exactly the listed points (doing nothing), as a real plugin would.
#[macro_export]
macro_rules! fake_plugin {
    ($name:literal, [$($p:ident),* $(,)?]) => {
        const _: () = {
            struct Fake;
            $(fake_side!(Fake, $p);)*
            kubesched_framework::register_plugin! {
                name: $name,
                plugin: Fake,
                factory: |_h: &kubesched_framework::Handle| -> Result<Fake, kubesched_framework::PluginError> {
                    Ok(Fake)
                },
            }
        };
    };
    ($name:literal, [$($p:ident),* $(,)?], args: $args:ty) => {
        const _: () = {
            struct Fake;
            $(fake_side!(Fake, $p);)*
            kubesched_framework::register_plugin! {
                name: $name,
                plugin: Fake,
                args: $args,
                factory: |_a: &$args, _h: &kubesched_framework::Handle| -> Result<Fake, kubesched_framework::PluginError> {
                    Ok(Fake)
                },
            }
        };
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
        fake_plugin!("NodeDeclaredFeatures", [PreFilter, Filter, EnqueueExtensions]);
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_resources: Vec<String>,
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
            ignored_resources: Vec::new(),
            scoring_strategy: default_strategy(),
        }
    }
}

impl PluginArgs for FitArgs {
    const KIND: &'static str = "NodeResourcesFitArgs";
    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
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
    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
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
