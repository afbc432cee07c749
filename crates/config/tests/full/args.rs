//! Plugin args are decoded once, when the file is loaded, and reach the factory typed; the
//! extenders' ignoredByScheduler resources are part of that one decode.

use std::sync::atomic::{AtomicUsize, Ordering};

use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{Framework, Handle, PluginError};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::json;

use crate::common::{FitArgs, HEADER, load_err, load_ok};

/// How often [`CountedArgs`] were deserialized.
static DECODES: AtomicUsize = AtomicUsize::new(0);
/// The `limit` the factory of `Counted` was given.
static BUILT_WITH: AtomicUsize = AtomicUsize::new(0);

/// Args that count their decodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
struct CountedArgs {
    limit: usize,
}

impl<'de> Deserialize<'de> for CountedArgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            #[serde(default)]
            limit: usize,
        }
        DECODES.fetch_add(1, Ordering::SeqCst);
        Raw::deserialize(d).map(|r| Self { limit: r.limit })
    }
}

impl PluginArgs for CountedArgs {
    const KIND: &'static str = "CountedArgs";
}

struct Counted;

impl kubesched_framework::FilterPlugin for Counted {
    fn filter(
        &self,
        _: &kubesched_framework::CycleState,
        _: &kubesched_framework::model::PodInfo,
        _: &kubesched_framework::model::NodeInfo,
    ) -> kubesched_framework::Status {
        kubesched_framework::Status::success()
    }
}

fn counted(args: &CountedArgs, _: &Handle) -> Result<Counted, PluginError> {
    BUILT_WITH.store(args.limit, Ordering::SeqCst);
    Ok(Counted)
}

kubesched_framework::register_plugin! {
    name: "Counted",
    plugin: Counted,
    args: CountedArgs,
    factory: counted,
}

#[test]
fn args_are_decoded_once_and_reach_the_factory_typed() {
    let loaded = load_ok(&format!(
        "{HEADER}profiles:
- plugins:
    filter:
      enabled:
      - name: Counted
  pluginConfig:
  - name: Counted
    args:
      limit: 7
"
    ));
    assert_eq!(DECODES.load(Ordering::SeqCst), 1, "loading decodes once");
    let spec = loaded.profiles[0].clone();
    assert_eq!(
        spec.plugin_args["Counted"].get::<CountedArgs>(),
        Some(&CountedArgs { limit: 7 })
    );
    let control = Handle::builder().build_with_control();
    let fw = Framework::new(spec, control.handle().clone()).expect("builds");
    assert_eq!(
        DECODES.load(Ordering::SeqCst),
        1,
        "building decodes nothing"
    );
    assert_eq!(BUILT_WITH.load(Ordering::SeqCst), 7);
    // What /configz shows is the effective form of that one decode.
    assert_eq!(
        fw.effective_args()["Counted"],
        json!({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "CountedArgs", "limit": 7})
    );
}

const EXTENDERS: &str = "extenders:
- urlPrefix: http://127.0.0.1:8888/
  filterVerb: filter
  managedResources:
  - name: example.com/gpu
    ignoredByScheduler: true
  - name: example.com/fpga
- urlPrefix: http://127.0.0.1:8889/
  filterVerb: filter
  managedResources:
  - name: example.com/nic
    ignoredByScheduler: true
";

#[test]
fn ignored_by_scheduler_resources_replace_node_resources_fit_ignored_resources() {
    let loaded = load_ok(&format!(
        "{HEADER}profiles:
- schedulerName: a
- schedulerName: b
  pluginConfig:
  - name: NodeResourcesFit
    args:
      ignoredResources: [example.com/old]
{EXTENDERS}"
    ));
    let want = ["example.com/gpu", "example.com/nic"];
    for (i, profile) in loaded.profiles.iter().enumerate() {
        let typed = profile.plugin_args["NodeResourcesFit"]
            .get::<FitArgs>()
            .expect("typed args");
        assert_eq!(typed.ignored_resources, want, "profile {i}");
        let printed = loaded.config.profiles[i]
            .plugin_config
            .iter()
            .find(|pc| pc.name == "NodeResourcesFit")
            .and_then(|pc| pc.args.as_ref())
            .expect("printed args");
        assert_eq!(printed["ignoredResources"], json!(want), "profile {i}");
    }
}

#[test]
fn ignored_by_scheduler_resources_need_node_resources_fit() {
    let err = load_err(&format!(
        "{HEADER}profiles:
- schedulerName: lean
  plugins:
    multiPoint:
      disabled:
      - name: NodeResourcesFit
{EXTENDERS}"
    ));
    assert_eq!(
        err,
        "sched.yaml: profiles[0].pluginConfig: can't find NodeResourcesFitArgs in plugin config: the extenders mark example.com/gpu, example.com/nic ignoredByScheduler, which only NodeResourcesFit can ignore"
    );
    // Nothing ignored: a profile without NodeResourcesFit is fine.
    load_ok(&format!(
        "{HEADER}profiles:
- plugins:
    multiPoint:
      disabled:
      - name: NodeResourcesFit
extenders:
- urlPrefix: http://127.0.0.1:8888/
  filterVerb: filter
"
    ));
}

/// How often the fake source decoded args.
static SOURCE_DECODES: AtomicUsize = AtomicUsize::new(0);
/// The limit the fake source's last build was given.
static SOURCE_BUILT_WITH: AtomicUsize = AtomicUsize::new(0);

/// The args of the fake plugin source: the `sourcedLimit` key claims them.
#[derive(Debug, Clone, PartialEq)]
struct SourceArgs {
    limit: u64,
}

fn source_claims(raw: &serde_json::Value) -> bool {
    raw.get("sourcedLimit").is_some()
}

fn source_decode(
    raw: &serde_json::Value,
) -> Result<kubesched_framework::registry::SourcedArgs, kubesched_framework::registry::ArgsError> {
    SOURCE_DECODES.fetch_add(1, Ordering::SeqCst);
    let limit =
        raw["sourcedLimit"]
            .as_u64()
            .ok_or_else(|| kubesched_framework::registry::ArgsError {
                message: "sourcedLimit: must be a number".into(),
            })?;
    Ok(kubesched_framework::registry::SourcedArgs {
        args: kubesched_framework::registry::DecodedArgs::new(
            SourceArgs { limit },
            Some(raw.clone()),
        ),
        points: kubesched_framework::PointSet::EMPTY
            .with(kubesched_framework::ExtensionPoint::Filter),
    })
}

/// A plugin the source builds under any name.
struct Sourced(String);

impl kubesched_framework::Plugin for Sourced {
    fn name(&self) -> &str {
        &self.0
    }
    fn as_filter(&self) -> Option<&dyn kubesched_framework::FilterPlugin> {
        Some(self)
    }
}

impl kubesched_framework::FilterPlugin for Sourced {
    fn filter(
        &self,
        _: &kubesched_framework::CycleState,
        _: &kubesched_framework::model::PodInfo,
        _: &kubesched_framework::model::NodeInfo,
    ) -> kubesched_framework::Status {
        kubesched_framework::Status::success()
    }
}

fn source_build(
    name: &str,
    args: &kubesched_framework::registry::DecodedArgs,
    _: &Handle,
) -> Result<std::sync::Arc<dyn kubesched_framework::Plugin>, PluginError> {
    let typed = args
        .get::<SourceArgs>()
        .ok_or_else(|| PluginError(format!("{name}: args of the wrong type")))?;
    SOURCE_BUILT_WITH.store(typed.limit as usize, Ordering::SeqCst);
    Ok(std::sync::Arc::new(Sourced(name.to_string())))
}

kubesched_framework::register_plugin_source! {
    kind: "fake",
    claims: source_claims,
    decode: source_decode,
    build: source_build,
}

#[test]
fn a_plugin_sources_args_are_decoded_once_too() {
    let loaded = load_ok(&format!(
        "{HEADER}profiles:
- plugins:
    filter:
      enabled:
      - name: Guest
  pluginConfig:
  - name: Guest
    args:
      sourcedLimit: 3
"
    ));
    assert_eq!(
        SOURCE_DECODES.load(Ordering::SeqCst),
        1,
        "loading decodes once"
    );
    let spec = loaded.profiles[0].clone();
    assert_eq!(
        spec.plugin_args["Guest"].get::<SourceArgs>(),
        Some(&SourceArgs { limit: 3 })
    );
    let control = Handle::builder().build_with_control();
    let fw = Framework::new(spec, control.handle().clone()).expect("the source builds Guest");
    assert_eq!(
        SOURCE_DECODES.load(Ordering::SeqCst),
        1,
        "building decodes nothing"
    );
    assert_eq!(
        SOURCE_BUILT_WITH.load(Ordering::SeqCst),
        3,
        "built from the typed args"
    );
    assert_eq!(fw.effective_args()["Guest"], json!({"sourcedLimit": 3}));
    // Refused args name the plugin and the profile.
    let refused = load_err(&format!(
        "{HEADER}profiles:
- plugins:
    filter:
      enabled:
      - name: Guest
  pluginConfig:
  - name: Guest
    args:
      sourcedLimit: many
"
    ));
    assert_eq!(
        refused,
        "sched.yaml: profiles[0].pluginConfig[0].args: plugin \"Guest\" of profile \"default-scheduler\": sourcedLimit: must be a number"
    );
}
