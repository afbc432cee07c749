//! multiPoint expansion and merging with the defaults, ported in spirit from upstream's
//! framework tests (expansion alone, defaults switched off with `disabled: *`) and default
//! plugin tests (user settings merged into the default profile).

use kubesched_framework::ExtensionPoint as P;

use crate::common::{HEADER, at, listing, load_err, load_ok};

/// Loads one profile whose `plugins` block is `plugins` (indented under `plugins:`).
fn profile(plugins: &str) -> kubesched_config::LoadedConfig {
    load_ok(&profile_doc(plugins))
}

fn profile_doc(plugins: &str) -> String {
    let indented: String = plugins.lines().map(|l| format!("    {l}\n")).collect();
    format!("{HEADER}profiles:\n- schedulerName: s\n  plugins:\n{indented}")
}

/// Same as [`profile`], with every default plugin switched off first.
fn alone(plugins: &str) -> String {
    let loaded = profile(&format!(
        "multiPoint:\n  disabled:\n  - name: '*'\n{}",
        plugins
    ));
    listing(&loaded.profiles[0])
}

#[test]
fn plugin_expands_to_every_point_it_implements() {
    let got = alone("  enabled:\n  - name: TestPlugin\n    weight: 5\n");
    assert_eq!(
        got,
        "QueueSort: TestPlugin
PreFilter: TestPlugin
Filter: TestPlugin
PostFilter: TestPlugin
PreScore: TestPlugin
Score: TestPlugin:5
Reserve: TestPlugin
Permit: TestPlugin
PreBind: TestPlugin
Bind: TestPlugin
PostBind: TestPlugin"
    );
}

#[test]
fn multipoint_plugin_disabled_at_some_points() {
    let got = alone(
        "  enabled:
  - name: TestPlugin
preScore:
  disabled:
  - name: TestPlugin
score:
  disabled:
  - name: TestPlugin
",
    );
    assert_eq!(
        got,
        "QueueSort: TestPlugin
PreFilter: TestPlugin
Filter: TestPlugin
PostFilter: TestPlugin
Reserve: TestPlugin
Permit: TestPlugin
PreBind: TestPlugin
Bind: TestPlugin
PostBind: TestPlugin"
    );
}

#[test]
fn several_multipoint_plugins_keep_their_order() {
    let loaded = profile(
        "multiPoint:
  disabled:
  - name: '*'
  enabled:
  - name: TestPlugin
  - name: ScorePlugin1
",
    );
    let spec = &loaded.profiles[0];
    assert_eq!(at(spec, P::PreScore), ["TestPlugin", "ScorePlugin1"]);
    assert_eq!(at(spec, P::Score), ["TestPlugin:1", "ScorePlugin1:1"]);
    assert_eq!(at(spec, P::Filter), ["TestPlugin"]);
}

#[test]
fn disabling_all_at_a_point_skips_multipoint_there() {
    let loaded = profile(
        "multiPoint:
  disabled:
  - name: '*'
  enabled:
  - name: TestPlugin
  - name: ScorePlugin1
preScore:
  disabled:
  - name: '*'
",
    );
    let spec = &loaded.profiles[0];
    assert!(spec.at(P::PreScore).is_empty());
    assert_eq!(at(spec, P::Score), ["TestPlugin:1", "ScorePlugin1:1"]);
}

#[test]
fn specific_point_order_goes_first() {
    // Plugins a point re-configures come first in the point's order, then the other
    // multiPoint plugins.
    let loaded = profile(
        "multiPoint:
  disabled:
  - name: '*'
  enabled:
  - name: ScoreWithNormalizePlugin1
  - name: TestPlugin
  - name: ScorePlugin1
score:
  enabled:
  - name: ScorePlugin1
  - name: TestPlugin
",
    );
    let spec = &loaded.profiles[0];
    assert_eq!(
        at(spec, P::Score),
        [
            "ScorePlugin1:1",
            "TestPlugin:1",
            "ScoreWithNormalizePlugin1:1"
        ]
    );
    assert_eq!(at(spec, P::PreScore), ["TestPlugin", "ScorePlugin1"]);
}

#[test]
fn point_only_plugins_come_after_multipoint_ones() {
    let loaded = profile(
        "multiPoint:
  disabled:
  - name: '*'
  enabled:
  - name: TestPlugin
  - name: ScorePlugin1
score:
  enabled:
  - name: ScoreWithNormalizePlugin1
  - name: ScorePlugin1
  - name: TestPlugin
",
    );
    assert_eq!(
        at(&loaded.profiles[0], P::Score),
        [
            "ScorePlugin1:1",
            "TestPlugin:1",
            "ScoreWithNormalizePlugin1:1"
        ]
    );
}

#[test]
fn point_weights_override_multipoint_weights() {
    let loaded = profile(
        "multiPoint:
  disabled:
  - name: '*'
  enabled:
  - name: TestPlugin
    weight: 9
  - name: ScorePlugin1
score:
  enabled:
  - name: ScorePlugin1
    weight: 5
  - name: TestPlugin
    weight: 3
",
    );
    assert_eq!(
        at(&loaded.profiles[0], P::Score),
        ["ScorePlugin1:5", "TestPlugin:3"]
    );
}

#[test]
fn point_weights_and_extra_point_plugins() {
    let loaded = profile(
        "multiPoint:
  disabled:
  - name: '*'
  enabled:
  - name: TestPlugin
  - name: ScorePlugin1
score:
  enabled:
  - name: ScorePlugin1
    weight: 5
  - name: ScorePlugin2
    weight: 5
  - name: TestPlugin
    weight: 3
",
    );
    assert_eq!(
        at(&loaded.profiles[0], P::Score),
        ["ScorePlugin1:5", "TestPlugin:3", "ScorePlugin2:5"]
    );
}

#[test]
fn disable_all_and_enable_some() {
    let got = alone(
        "  enabled:
  - name: QueueSortPlugin
  - name: BindPlugin
  - name: ScorePlugin1
",
    );
    assert_eq!(
        got,
        "QueueSort: QueueSortPlugin
PreScore: ScorePlugin1
Score: ScorePlugin1:1
Bind: BindPlugin"
    );
}

#[test]
fn explicitly_enabled_plugin_survives_its_own_disabled_entry() {
    // `disabled` removes defaults; a plugin the user enables in the same set stays.
    let loaded = profile(
        "multiPoint:
  enabled:
  - name: BindPlugin
  - name: QueueSortPlugin
  - name: ScorePlugin1
  disabled:
  - name: ScorePlugin1
  - name: PrioritySort
  - name: DefaultBinder
",
    );
    let spec = &loaded.profiles[0];
    assert_eq!(at(spec, P::QueueSort), ["QueueSortPlugin"]);
    assert_eq!(at(spec, P::Bind), ["BindPlugin"]);
    assert_eq!(
        at(spec, P::Score).last().map(String::as_str),
        Some("ScorePlugin1:1")
    );
}

#[test]
fn duplicate_multipoint_plugin_is_refused() {
    let err = load_err(&profile_doc(
        "multiPoint:
  disabled:
  - name: '*'
  enabled:
  - name: TestPlugin
  - name: TestPlugin
",
    ));
    assert!(err.contains("already registered"), "{err}");
    assert!(
        err.contains("profiles[0].plugins.multiPoint.enabled["),
        "{err}"
    );
}

// ---- merged with the default profile ----

#[test]
fn reconfigured_default_score_moves_first() {
    // A Score entry for a default re-configures it: it leads the Score list with its weight,
    // the other defaults follow in multiPoint order (upstream's ordering).
    let loaded = profile(
        "score:
  enabled:
  - name: NodeResourcesFit
    weight: 5
",
    );
    let spec = &loaded.profiles[0];
    assert_eq!(
        at(spec, P::Score),
        [
            "NodeResourcesFit:5",
            "TaintToleration:3",
            "NodeAffinity:2",
            "VolumeBinding:1",
            "PodTopologySpread:2",
            "InterPodAffinity:2",
            "NodeResourcesBalancedAllocation:1",
            "ImageLocality:1",
        ]
    );
    // Other points are untouched.
    assert_eq!(at(spec, P::PreScore)[2], "NodeResourcesFit");
}

#[test]
fn score_entry_without_weight_means_one() {
    // As upstream: the Score point's own entry decides the weight, even when it sets none.
    let loaded = profile("score:\n  enabled:\n  - name: TaintToleration\n");
    assert_eq!(at(&loaded.profiles[0], P::Score)[0], "TaintToleration:1");
}

#[test]
fn multipoint_reconfigures_a_default_in_place() {
    let loaded = profile(
        "multiPoint:
  enabled:
  - name: TaintToleration
    weight: 5
",
    );
    let spec = &loaded.profiles[0];
    assert_eq!(at(spec, P::Score)[0], "TaintToleration:5");
    assert_eq!(at(spec, P::Score).len(), 8);
    let multi = &loaded.config.profiles[0]
        .plugins
        .as_ref()
        .expect("plugins")
        .multi_point
        .enabled;
    let pos = multi
        .iter()
        .position(|e| e.name == "TaintToleration")
        .expect("still there");
    assert_eq!(pos, 4, "kept at its default position");
    assert_eq!(multi[pos].weight, Some(5));
}

#[test]
fn disabling_a_default_at_one_point() {
    let loaded = profile("score:\n  disabled:\n  - name: ImageLocality\n");
    let spec = &loaded.profiles[0];
    assert!(
        !at(spec, P::Score)
            .iter()
            .any(|s| s.starts_with("ImageLocality"))
    );
    assert_eq!(at(spec, P::Score).len(), 7);
    assert_eq!(at(spec, P::Filter).len(), 14);
}

#[test]
fn disabling_all_defaults_at_one_point_then_enabling_one() {
    let loaded = profile(
        "filter:
  disabled:
  - name: '*'
  enabled:
  - name: NodeName
",
    );
    let spec = &loaded.profiles[0];
    assert_eq!(at(spec, P::Filter), ["NodeName"]);
    assert_eq!(at(spec, P::PreFilter).len(), 11);
}

#[test]
fn disabling_a_default_everywhere() {
    let loaded = profile("multiPoint:\n  disabled:\n  - name: NodeResourcesFit\n");
    let spec = &loaded.profiles[0];
    assert!(!spec.plugin_names().contains("NodeResourcesFit"));
    assert_eq!(at(spec, P::Filter).len(), 13);
}

#[test]
fn custom_multipoint_plugin_joins_after_the_defaults() {
    let loaded = profile(
        "multiPoint:
  enabled:
  - name: ScorePlugin1
    weight: 4
",
    );
    let spec = &loaded.profiles[0];
    assert_eq!(
        at(spec, P::PreScore).last().map(String::as_str),
        Some("ScorePlugin1")
    );
    assert_eq!(
        at(spec, P::Score).last().map(String::as_str),
        Some("ScorePlugin1:4")
    );
}

#[test]
fn default_queue_sort_replaced() {
    let loaded = profile(
        "queueSort:
  enabled:
  - name: QueueSortPlugin
  disabled:
  - name: '*'
",
    );
    assert_eq!(at(&loaded.profiles[0], P::QueueSort), ["QueueSortPlugin"]);
}

#[test]
fn duplicate_at_a_point_is_refused() {
    let err = load_err(&profile_doc(
        "score:
  enabled:
  - name: ScorePlugin2
  - name: ScorePlugin2
",
    ));
    assert!(
        err.contains(
            "sched.yaml: profiles[0].plugins.score.enabled[1].name: plugin \"ScorePlugin2\" already registered as \"ScorePlugin\""
        ),
        "{err}"
    );
}

#[test]
fn plugin_at_a_point_it_does_not_implement_is_refused() {
    let err = load_err(&profile_doc(
        "filter:\n  enabled:\n  - name: ImageLocality\n",
    ));
    assert!(
        err.contains(
            "sched.yaml: profiles[0].plugins.filter.enabled[0].name: plugin \"ImageLocality\" does not extend FilterPlugin"
        ),
        "{err}"
    );
}
