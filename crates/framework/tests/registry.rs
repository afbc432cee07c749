//! Link-time registration: what `register_plugin!` puts in the registry, args decoding
//! with defaults, and duplicate detection. This test binary links only the plugins below.

use std::sync::Arc;

use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::registry::{self, PluginArgs};
use kubesched_framework::{
    CycleState, ExtensionPoint, FilterPlugin, Handle, Plugin, PluginError, Status,
};

#[derive(Debug)]
struct Always;

impl Always {
    fn new(_: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

impl FilterPlugin for Always {
    fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
        Status::success()
    }
}

kubesched_framework::register_plugin! {
    name: "Always",
    plugin: Always,
    factory: Always::new,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct LimitArgs {
    max_pods: i64,
}

impl Default for LimitArgs {
    fn default() -> Self {
        Self { max_pods: 3 }
    }
}

impl PluginArgs for LimitArgs {
    const KIND: &'static str = "LimitArgs";
    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
        if self.max_pods < 0 {
            return Err(format!(
                "maxPods: must not be negative, got {}",
                self.max_pods
            ));
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Limit(i64);

impl Limit {
    fn new(args: &LimitArgs, _: &Handle) -> Result<Self, PluginError> {
        Ok(Self(args.max_pods))
    }
}

impl FilterPlugin for Limit {
    fn filter(&self, _: &CycleState, _: &PodInfo, node: &NodeInfo) -> Status {
        if node.pods.len() as i64 >= self.0 {
            Status::unschedulable("full")
        } else {
            Status::success()
        }
    }
}

kubesched_framework::register_plugin! {
    name: "Limit",
    plugin: Limit,
    args: LimitArgs,
    factory: Limit::new,
}

// A second crate registering "Always" would be reported; simulate it from this binary.
mod again {
    use super::*;

    struct AlwaysAgain;

    impl FilterPlugin for AlwaysAgain {
        fn filter(&self, _: &CycleState, _: &PodInfo, _: &NodeInfo) -> Status {
            Status::success()
        }
    }

    kubesched_framework::register_plugin! {
        name: "Always",
        plugin: AlwaysAgain,
        factory: |_: &Handle| Ok::<_, PluginError>(AlwaysAgain),
    }
}

#[test]
fn registered_plugins_are_listed_sorted() {
    let names: Vec<&str> = registry::plugins().iter().map(|d| d.name).collect();
    assert_eq!(names, vec!["Always", "Always", "Limit"]);
    let d = registry::find("Limit").expect("registered");
    assert_eq!(d.extension_points().to_vec(), [ExtensionPoint::Filter]);
    assert_eq!(d.args.kind, Some("LimitArgs"));
}

#[test]
fn every_registered_plugin_implements_exactly_its_listed_points() {
    for d in registry::plugins() {
        let args = (d.args.decode)(None, &kubesched_framework::FeatureGates::defaults())
            .expect("defaults decode");
        let plugin = (d.factory)(&args, &Handle::default()).expect("builds");
        assert_eq!(
            kubesched_framework::implemented_points(plugin.as_ref()),
            d.extension_points().to_vec(),
            "{}",
            d.name
        );
    }
}

#[test]
fn duplicates_are_reported() {
    let dups = registry::duplicates();
    assert_eq!(dups.keys().copied().collect::<Vec<_>>(), vec!["Always"]);
    let err = registry::check_unique().expect_err("Always twice");
    assert!(err.to_string().contains("Always"), "{err}");
}

#[test]
fn args_default_decode_and_validate() {
    let d = registry::find("Limit").expect("registered");
    let defaults = (d.args.decode)(None, &kubesched_framework::FeatureGates::defaults())
        .expect("defaults decode");
    assert_eq!(
        defaults.get::<LimitArgs>(),
        Some(&LimitArgs { max_pods: 3 })
    );
    let eff = defaults.effective.expect("effective args");
    assert_eq!(eff["maxPods"], 3);
    assert_eq!(eff["kind"], "LimitArgs");

    let v = serde_json::json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "LimitArgs", "maxPods": 7});
    let decoded =
        (d.args.decode)(Some(&v), &kubesched_framework::FeatureGates::defaults()).expect("decodes");
    assert_eq!(decoded.get::<LimitArgs>(), Some(&LimitArgs { max_pods: 7 }));

    let bad = serde_json::json!({"maxPods": -1});
    let err = (d.args.decode)(Some(&bad), &kubesched_framework::FeatureGates::defaults())
        .expect_err("negative");
    assert!(
        err.message.contains("maxPods: must not be negative"),
        "{}",
        err.message
    );
    let unknown = serde_json::json!({"maxPod": 1});
    assert!(
        (d.args.decode)(
            Some(&unknown),
            &kubesched_framework::FeatureGates::defaults()
        )
        .is_err(),
        "unknown fields are refused"
    );

    let a = registry::find("Always").expect("registered");
    assert!(
        (a.args.decode)(
            Some(&serde_json::json!({"x": 1})),
            &kubesched_framework::FeatureGates::defaults()
        )
        .is_err()
    );
    assert!((a.args.decode)(None, &kubesched_framework::FeatureGates::defaults()).is_ok());
}

#[test]
fn factory_builds_with_decoded_args() {
    let d = registry::find("Limit").expect("registered");
    let args = (d.args.decode)(
        Some(&serde_json::json!({"maxPods": 0})),
        &kubesched_framework::FeatureGates::defaults(),
    )
    .expect("decodes");
    let plugin: Arc<dyn Plugin> = (d.factory)(&args, &Handle::default()).expect("builds");
    assert_eq!(plugin.name(), "Limit");
    let node = NodeInfo::default();
    let pod = kubesched_testing::PodBuilder::new("p").info();
    let s = plugin
        .as_filter()
        .expect("filter")
        .filter(&CycleState::new(), &pod, &node);
    assert!(s.is_rejected());
}
