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
