//! Table tests per extension point, AddPod/RemovePod through the framework, default
//! selectors, hints, args, a many-node check that Filter only reads precomputed counts,
//! and snapshots.

use std::sync::Arc;

use kubesched_framework::model::k8s_openapi::api::apps::v1 as apps;
use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ObjectMeta, Time,
};
use kubesched_framework::model::k8s_openapi::jiff::Timestamp;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{CycleState, Handle, ObjectStore, registry};
use kubesched_testing::{
    Churn, NodeBuilder, PluginHarness, PluginRun, PodBuilder, node_infos, node_term, selector,
};

use super::*;
use crate::common::default_selector;
use crate::filtering::PreFilterState;

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        ..Default::default()
    }
}

fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn service(store: &ObjectStore, ns: &str, name: &str, sel: &[(&str, &str)]) {
    store.services.upsert(api::Service {
        metadata: meta(ns, name),
        spec: Some(api::ServiceSpec {
            selector: Some(map(sel)),
            ..Default::default()
        }),
        ..Default::default()
    });
}

fn harness_with(
    args: Option<serde_json::Value>,
    setup: impl FnOnce(&ObjectStore),
) -> PluginHarness {
    let store = ObjectStore::default();
    setup(&store);
    let handle = Handle::builder().objects(Arc::new(store));
    PluginHarness::from_registry(NAME, args, handle).expect("plugin is registered")
}

fn harness() -> PluginHarness {
    harness_with(None, |_| {})
}

fn node(name: &str, zone: &str) -> NodeBuilder {
    let n = NodeBuilder::new(name);
    if zone.is_empty() { n } else { n.zone(zone) }
}

fn foo(name: &str, node: &str) -> PodBuilder {
    PodBuilder::new(name).node(node).label("app", "foo")
}

fn constraint(
    max_skew: i32,
    key: &str,
    when: &str,
    labels: &[(&str, &str)],
) -> api::TopologySpreadConstraint {
    api::TopologySpreadConstraint {
        max_skew,
        topology_key: key.into(),
        when_unsatisfiable: when.into(),
        label_selector: Some(selector(labels)),
        ..Default::default()
    }
}

fn run(
    h: &PluginHarness,
    pod: PodBuilder,
    nodes: Vec<NodeBuilder>,
    existing: Vec<PodBuilder>,
) -> PluginRun {
    let pods: Vec<Arc<PodInfo>> = existing.into_iter().map(PodBuilder::info).collect();
    h.run(&pod.info(), &node_infos(nodes, &pods))
}

fn names(nodes: &[NodeBuilder]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| n.clone().build().metadata.name.unwrap_or_default())
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Pass,
    Skew,
    Label,
}

fn filter_outcome(run: &PluginRun, node: &str) -> Want {
    match run.filter_of(node) {
        None => Want::Pass,
        Some(s) => match (s.code.as_str(), s.reasons.first().map(String::as_str)) {
            ("Success", _) => Want::Pass,
            ("Unschedulable", Some(ERR_REASON_CONSTRAINTS_NOT_MATCH)) => Want::Skew,
            ("UnschedulableAndUnresolvable", Some(ERR_REASON_NODE_LABEL_NOT_MATCH)) => Want::Label,
            other => panic!("unexpected filter status on {node}: {other:?}"),
        },
    }
}

struct FilterCase<'a> {
    name: &'a str,
    args: Option<serde_json::Value>,
    services: &'a [(&'a str, &'a [(&'a str, &'a str)])],
    pod: PodBuilder,
    nodes: Vec<NodeBuilder>,
    existing: Vec<PodBuilder>,
    want: Vec<Want>,
}

fn check_filter(case: FilterCase<'_>) {
    let services = case.services;
    let h = harness_with(case.args, |store| {
        for (name, sel) in services {
            service(store, "default", name, sel);
        }
    });
    let node_names = names(&case.nodes);
    let r = run(&h, case.pod, case.nodes, case.existing);
    assert_eq!(
        r.pre_filter.as_ref().map(|s| s.code.as_str()),
        Some("Success"),
        "{}",
        case.name
    );
    let got: Vec<Want> = node_names.iter().map(|n| filter_outcome(&r, n)).collect();
    assert_eq!(got, case.want, "{}", case.name);
}

fn hard_foo(max_skew: i32, key: &str) -> PodBuilder {
    PodBuilder::new("p").label("app", "foo").spread_constraint(
        max_skew,
        key,
        "DoNotSchedule",
        &[("app", "foo")],
    )
}

#[test]
fn filter_table() {
    use Want::*;
    let four = || {
        vec![
            node("n1", "a"),
            node("n2", "a"),
            node("n3", "b"),
            node("n4", "b"),
        ]
    };
    let three_zones = || vec![node("n1", "a"), node("n2", "b"), node("n3", "c")];
    let policy_pod = |affinity: Option<&str>, taints: Option<&str>| {
        PodBuilder::new("p")
            .label("app", "foo")
            .required_node_term(node_term(ZONE, "In", &["a", "b"]))
            .spread_constraint_full(api::TopologySpreadConstraint {
                node_affinity_policy: affinity.map(String::from),
                node_taints_policy: taints.map(String::from),
                ..constraint(1, ZONE, "DoNotSchedule", &[("app", "foo")])
            })
    };
    let cases = vec![
        FilterCase {
            name: "maxSkew 1 by zone: only the emptier zone",
            args: None,
            services: &[],
            pod: hard_foo(1, ZONE),
            nodes: four(),
            existing: vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n3")],
            want: vec![Skew, Skew, Pass, Pass],
        },
        FilterCase {
            name: "maxSkew 2 tolerates the difference",
            args: None,
            services: &[],
            pod: hard_foo(2, ZONE),
            nodes: four(),
            existing: vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n3")],
            want: vec![Pass, Pass, Pass, Pass],
        },
        FilterCase {
            name: "a node without the topology key is unresolvable",
            args: None,
            services: &[],
            pod: hard_foo(1, ZONE),
            nodes: vec![node("n1", "a"), node("n2", "")],
            existing: vec![],
            want: vec![Pass, Label],
        },
        FilterCase {
            name: "a pod its own selector does not match adds nothing to the skew",
            args: None,
            services: &[],
            pod: PodBuilder::new("p").spread_constraint(
                1,
                ZONE,
                "DoNotSchedule",
                &[("app", "foo")],
            ),
            nodes: four(),
            existing: vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n3")],
            want: vec![Pass, Pass, Pass, Pass],
        },
        FilterCase {
            name: "per-host spreading",
            args: None,
            services: &[],
            pod: hard_foo(1, HOSTNAME),
            nodes: vec![node("n1", "a"), node("n2", "a"), node("n3", "a")],
            existing: vec![foo("f1", "n1"), foo("f2", "n1"), foo("f3", "n2")],
            want: vec![Skew, Skew, Pass],
        },
        FilterCase {
            name: "every constraint must hold",
            args: None,
            services: &[],
            pod: hard_foo(1, ZONE).spread_constraint(
                1,
                HOSTNAME,
                "DoNotSchedule",
                &[("app", "foo")],
            ),
            nodes: four(),
            existing: vec![foo("f1", "n1"), foo("f3", "n3")],
            want: vec![Skew, Pass, Skew, Pass],
        },
        FilterCase {
            name: "fewer domains than minDomains: the global minimum is 0",
            args: None,
            services: &[],
            pod: PodBuilder::new("p")
                .label("app", "foo")
                .spread_constraint_full(api::TopologySpreadConstraint {
                    min_domains: Some(3),
                    ..constraint(1, ZONE, "DoNotSchedule", &[("app", "foo")])
                }),
            nodes: vec![node("n1", "a"), node("n2", "b")],
            existing: vec![foo("f1", "n1"), foo("f2", "n2")],
            want: vec![Skew, Skew],
        },
        FilterCase {
            name: "minDomains reached: the real minimum",
            args: None,
            services: &[],
            pod: PodBuilder::new("p")
                .label("app", "foo")
                .spread_constraint_full(api::TopologySpreadConstraint {
                    min_domains: Some(2),
                    ..constraint(1, ZONE, "DoNotSchedule", &[("app", "foo")])
                }),
            nodes: vec![node("n1", "a"), node("n2", "b")],
            existing: vec![foo("f1", "n1"), foo("f2", "n2")],
            want: vec![Pass, Pass],
        },
        FilterCase {
            name: "nodeAffinityPolicy Honor (default): domains the pod cannot use do not count",
            args: None,
            services: &[],
            pod: policy_pod(None, None),
            nodes: three_zones(),
            existing: vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n2")],
            want: vec![Pass, Skew, Pass],
        },
        FilterCase {
            name: "nodeAffinityPolicy Ignore: they count",
            args: None,
            services: &[],
            pod: policy_pod(Some("Ignore"), None),
            nodes: three_zones(),
            existing: vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n2")],
            want: vec![Skew, Skew, Pass],
        },
        FilterCase {
            name: "nodeTaintsPolicy Honor: untolerated tainted nodes do not count",
            args: None,
            services: &[],
            pod: PodBuilder::new("p")
                .label("app", "foo")
                .spread_constraint_full(api::TopologySpreadConstraint {
                    node_taints_policy: Some("Honor".into()),
                    ..constraint(1, ZONE, "DoNotSchedule", &[("app", "foo")])
                }),
            nodes: vec![
                node("n1", "a"),
                node("n2", "b"),
                node("n3", "c").taint("dedicated", "x", "NoSchedule"),
            ],
            existing: vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n2")],
            want: vec![Pass, Skew, Pass],
        },
        FilterCase {
            name: "nodeTaintsPolicy Ignore (default): they count",
            args: None,
            services: &[],
            pod: hard_foo(1, ZONE),
            nodes: vec![
                node("n1", "a"),
                node("n2", "b"),
                node("n3", "c").taint("dedicated", "x", "NoSchedule"),
            ],
            existing: vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n2")],
            want: vec![Skew, Skew, Pass],
        },
        FilterCase {
            name: "pods of other namespaces and terminating pods do not count",
            args: None,
            services: &[],
            pod: hard_foo(1, ZONE),
            nodes: vec![node("n1", "a"), node("n2", "b")],
            existing: vec![
                foo("f1", "n1").namespace("other"),
                foo("f2", "n1").with(|p| {
                    p.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
                }),
                foo("f3", "n2"),
            ],
            want: vec![Pass, Skew],
        },
        FilterCase {
            name: "matchLabelKeys narrows the selector to the pod's own value",
            args: None,
            services: &[],
            pod: PodBuilder::new("p")
                .labels(&[("app", "foo"), ("version", "v2")])
                .spread_constraint_full(api::TopologySpreadConstraint {
                    match_label_keys: Some(vec!["version".into()]),
                    ..constraint(1, ZONE, "DoNotSchedule", &[("app", "foo")])
                }),
            nodes: vec![node("n1", "a"), node("n2", "b")],
            existing: vec![
                foo("old1", "n1").label("version", "v1"),
                foo("old2", "n1").label("version", "v1"),
                foo("new1", "n2").label("version", "v2"),
            ],
            want: vec![Pass, Skew],
        },
        FilterCase {
            name: "List defaults with a hard constraint take the Service's selector",
            args: Some(serde_json::json!({
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ]
            })),
            services: &[("foo-svc", &[("app", "foo")])],
            pod: PodBuilder::new("p").label("app", "foo"),
            nodes: four(),
            existing: vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n3")],
            want: vec![Skew, Skew, Pass, Pass],
        },
    ];
    for case in cases {
        check_filter(case);
    }
}

#[test]
fn pre_filter_skips_without_hard_constraints() {
    let skip = |h: &PluginHarness, pod: PodBuilder| {
        let r = run(h, pod, vec![node("n1", "a")], vec![foo("f1", "n1")]);
        assert_eq!(r.pre_filter.as_ref().map(|s| s.code.as_str()), Some("Skip"));
        assert!(r.filter_of("n1").is_none());
    };
    // Only soft constraints of its own (defaults are not used then).
    skip(
        &harness(),
        PodBuilder::new("p").spread_constraint(1, ZONE, "ScheduleAnyway", &[("app", "foo")]),
    );
    // System defaults are all soft, even when a Service selects the pod.
    let h = harness_with(None, |s| service(s, "default", "svc", &[("app", "foo")]));
    skip(&h, PodBuilder::new("p").label("app", "foo"));
    // List defaults with a hard constraint but nothing selecting the pod.
    let h = harness_with(
        Some(serde_json::json!({
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
            ]
        })),
        |_| {},
    );
    skip(&h, PodBuilder::new("p").label("app", "foo"));
}

fn framework_state(
    h: &PluginHarness,
    pod: &Arc<PodInfo>,
    nodes: &[Arc<NodeInfo>],
) -> (kubesched_framework::Framework, CycleState) {
    let fw = h.framework();
    let mut state = CycleState::new();
    let out = fw.run_pre_filter_plugins(&mut state, pod, nodes);
    assert!(out.status.is_success(), "{:?}", out.status);
    (fw, state)
}

#[test]
fn add_and_remove_pod_keep_counts() {
    let h = harness();
    let f1 = foo("f1", "n1").info();
    let nodes = h.set_nodes(&node_infos(
        vec![node("n1", "a"), node("n2", "b"), node("n3", "")],
        std::slice::from_ref(&f1),
    ));
    let pod = hard_foo(1, ZONE).info();
    let (fw, mut state) = framework_state(&h, &pod, &nodes);
    let before = state.read::<PreFilterState>().expect("state").clone();
    let ok =
        |state: &CycleState, i: usize| fw.run_filter_plugins(state, &pod, &nodes[i]).is_success();
    // a:1, b:0 → zone a is full.
    assert!(!ok(&state, 0) && ok(&state, 1));

    // A nominated foo pod in zone b raises the minimum to 1: both zones are open.
    let f2 = foo("f2", "n2").info();
    assert!(
        fw.run_pre_filter_extension_add_pod(&mut state, &pod, &f2, &nodes[1])
            .is_success()
    );
    assert_eq!(
        state.read::<PreFilterState>().expect("state").domains[0].min(),
        1
    );
    assert!(ok(&state, 0) && ok(&state, 1));

    // Pods that cannot matter are ignored: another namespace, another app, a node
    // without the key.
    let other_ns = foo("x", "n1").namespace("other").info();
    let other_app = PodBuilder::new("y").node("n1").label("app", "bar").info();
    let keyless = foo("z", "n3").info();
    for (p, n) in [(&other_ns, 0), (&other_app, 0), (&keyless, 2)] {
        assert!(
            fw.run_pre_filter_extension_add_pod(&mut state, &pod, p, &nodes[n])
                .is_success()
        );
    }
    assert!(ok(&state, 0) && ok(&state, 1));

    // Preemption removes f1: a:0, b:1, so zone b is full now.
    assert!(
        fw.run_pre_filter_extension_remove_pod(&mut state, &pod, &f1, &nodes[0])
            .is_success()
    );
    assert!(ok(&state, 0) && !ok(&state, 1));

    // Undo everything: the counts are back to PreFilter's, and so is the minimum here
    // (both zones were followed all along).
    assert!(
        fw.run_pre_filter_extension_add_pod(&mut state, &pod, &f1, &nodes[0])
            .is_success()
    );
    assert!(
        fw.run_pre_filter_extension_remove_pod(&mut state, &pod, &f2, &nodes[1])
            .is_success()
    );
    let after = state.read::<PreFilterState>().expect("state");
    assert_eq!(
        after.domains[0].sorted_counts(),
        before.domains[0].sorted_counts()
    );
    assert_eq!(
        after.domains[0].min_match(1),
        before.domains[0].min_match(1)
    );
}

/// Upstream follows only the two smallest domains under AddPod/RemovePod (its "critical
/// paths"), so the minimum can come out too high; kubesched decides as upstream does.
#[test]
fn add_pod_follows_only_the_two_smallest_domains_as_upstream() {
    let h = harness();
    // Three zones, no matching pod anywhere: a:0, b:0, c:0; a and b are followed.
    let nodes = h.set_nodes(&node_infos(
        vec![node("n1", "a"), node("n2", "b"), node("n3", "c")],
        &[],
    ));
    let pod = hard_foo(1, ZONE).info();
    let (fw, mut state) = framework_state(&h, &pod, &nodes);
    let ok =
        |state: &CycleState, i: usize| fw.run_filter_plugins(state, &pod, &nodes[i]).is_success();
    assert!(ok(&state, 0) && ok(&state, 1) && ok(&state, 2));

    // Two nominated pods, in zones a and b: a:1, b:1, c:0. The true minimum is 0, so a
    // pod in zone a would make a skew of 2. Upstream's paths only saw a and b grow to 1
    // and take 1 as the minimum: zone a passes (skew 1).
    for (name, i) in [("f1", 0), ("f2", 1)] {
        let p = foo(name, &format!("n{}", i + 1)).info();
        assert!(
            fw.run_pre_filter_extension_add_pod(&mut state, &pod, &p, &nodes[i])
                .is_success()
        );
    }
    let st = state.read::<PreFilterState>().expect("state");
    assert_eq!(st.domains[0].min(), 0, "the exact minimum");
    assert_eq!(st.domains[0].min_match(1), 1, "upstream's minimum");
    assert!(ok(&state, 0) && ok(&state, 1) && ok(&state, 2));

    // A removal brings a smaller count back into view: c is still untracked, but a drops
    // to 0 and becomes the minimum again, so zone b (1 + 1 - 0) is rejected.
    let f1 = foo("f1", "n1").info();
    assert!(
        fw.run_pre_filter_extension_remove_pod(&mut state, &pod, &f1, &nodes[0])
            .is_success()
    );
    assert!(ok(&state, 0) && !ok(&state, 1) && ok(&state, 2));

    // The paths belong to the cycle's copies only: a fresh PreFilter is exact again.
    let (_, fresh) = framework_state(&h, &pod, &nodes);
    let fresh = fresh.read::<PreFilterState>().expect("state");
    assert_eq!(fresh.domains[0].min_match(1), 0);
}

#[test]
fn missing_state_is_an_error() {
    let h = harness();
    let nodes = h.set_nodes(&node_infos(vec![node("n1", "a")], &[]));
    let pod = hard_foo(1, ZONE).info();
    let plugin = h.plugin();
    assert!(
        plugin
            .as_filter()
            .expect("filter")
            .filter(&CycleState::new(), &pod, &nodes[0])
            .is_error()
    );
    let ext = plugin
        .as_pre_filter()
        .and_then(|p| p.pre_filter_extensions())
        .expect("extensions");
    assert!(
        ext.add_pod(&mut CycleState::new(), &pod, &pod, &nodes[0])
            .is_error()
    );
    assert!(
        plugin
            .as_score()
            .expect("score")
            .score(&CycleState::new(), &pod, &nodes[0])
            .is_err()
    );
}

/// The performance contract: PreFilter folds every pod into one count per domain, and
/// Filter answers from those counts and the node's labels alone.
#[test]
fn filter_reads_precomputed_counts_not_pods() {
    const NODES: usize = 5000;
    const ZONES: usize = 50;
    let h = harness();
    let builders: Vec<NodeBuilder> = (0..NODES)
        .map(|i| node(&format!("n{i}"), &format!("z{}", i % ZONES)))
        .collect();
    // One foo pod on every node except those of zone z0.
    let pods: Vec<Arc<PodInfo>> = (0..NODES)
        .filter(|i| i % ZONES != 0)
        .map(|i| foo(&format!("f{i}"), &format!("n{i}")).info())
        .collect();
    let nodes = h.set_nodes(&node_infos(builders, &pods));
    let pod = hard_foo(1, ZONE).info();
    let plugin = h.plugin();
    let mut state = CycleState::new();
    let (_, s) = plugin
        .as_pre_filter()
        .expect("pre-filter")
        .pre_filter(&mut state, &pod, &nodes);
    assert!(s.is_success());
    let st = state.read::<PreFilterState>().expect("state");
    assert_eq!(st.domains.len(), 1);
    assert_eq!(st.domains[0].len(), ZONES);
    assert_eq!(st.domains[0].min(), 0);
    assert_eq!(st.domains[0].count("z1"), Some(100));

    let filter = plugin.as_filter().expect("filter");
    let mut feasible = 0;
    for (i, info) in nodes.iter().enumerate() {
        let s = filter.filter(&state, &pod, info);
        let bare = NodeInfo::new(info.node().expect("node").clone());
        assert_eq!(filter.filter(&state, &pod, &bare), s, "node {i}");
        if s.is_success() {
            assert_eq!(i % ZONES, 0, "node {i}");
            feasible += 1;
        } else {
            assert_eq!(s.reasons(), [ERR_REASON_CONSTRAINTS_NOT_MATCH]);
        }
    }
    assert_eq!(feasible, NODES / ZONES);
}

struct ScoreCase<'a> {
    name: &'a str,
    args: Option<serde_json::Value>,
    setup: fn(&ObjectStore),
    pod: PodBuilder,
    nodes: Vec<NodeBuilder>,
    existing: Vec<PodBuilder>,
    /// None: PreScore skips.
    want: Option<(Vec<i64>, Vec<i64>)>,
}

fn check_score(case: ScoreCase<'_>) {
    let h = harness_with(case.args, case.setup);
    let r = run(&h, case.pod, case.nodes, case.existing);
    let pre_score = r.pre_score.as_ref().map(|s| s.code.as_str());
    match case.want {
        None => assert_eq!(pre_score, Some("Skip"), "{}", case.name),
        Some((raw, normalized)) => {
            assert_eq!(pre_score, Some("Success"), "{}", case.name);
            let got_raw: Vec<i64> = r.nodes.iter().filter_map(|n| n.score).collect();
            let got_norm: Vec<i64> = r.nodes.iter().filter_map(|n| n.normalized_score).collect();
            assert_eq!(got_raw, raw, "{} (raw)", case.name);
            assert_eq!(got_norm, normalized, "{} (normalized)", case.name);
        }
    }
}

fn web_service(store: &ObjectStore) {
    service(store, "default", "web", &[("app", "web")]);
}

fn web(name: &str, node: &str) -> PodBuilder {
    PodBuilder::new(name).node(node).label("app", "web")
}

#[test]
fn score_table() {
    let zones = || vec![node("n1", "a"), node("n2", "a"), node("n3", "b")];
    let soft_foo = |max_skew: i32, key: &str| {
        PodBuilder::new("p").label("app", "foo").spread_constraint(
            max_skew,
            key,
            "ScheduleAnyway",
            &[("app", "foo")],
        )
    };
    let honour_pod = |policy: Option<&str>| {
        PodBuilder::new("p")
            .label("app", "foo")
            .required_node_term(node_term(ZONE, "In", &["a", "b"]))
            .spread_constraint_full(api::TopologySpreadConstraint {
                node_affinity_policy: policy.map(String::from),
                ..constraint(1, ZONE, "ScheduleAnyway", &[("app", "foo")])
            })
    };
    let cases = vec![
        ScoreCase {
            name: "zones with fewer matching pods score higher",
            args: None,
            setup: |_| {},
            pod: soft_foo(1, ZONE),
            nodes: zones(),
            existing: vec![foo("f1", "n1"), foo("f2", "n1"), foo("f3", "n2")],
            want: Some((vec![4, 4, 0], vec![0, 0, 100])),
        },
        ScoreCase {
            name: "hostname constraints count on the node itself",
            args: None,
            setup: |_| {},
            pod: soft_foo(1, HOSTNAME),
            nodes: zones(),
            existing: vec![foo("f1", "n1"), foo("f2", "n1"), foo("f3", "n2")],
            want: Some((vec![3, 2, 0], vec![0, 33, 100])),
        },
        ScoreCase {
            name: "nodes without the key are ignored and score 0",
            args: None,
            setup: |_| {},
            pod: soft_foo(1, ZONE),
            nodes: vec![node("n1", "a"), node("n2", "b"), node("n3", "")],
            existing: vec![
                foo("f1", "n1"),
                foo("f2", "n3"),
                foo("f3", "n3"),
                foo("f4", "n3"),
            ],
            want: Some((vec![1, 0, 0], vec![0, 100, 0])),
        },
        ScoreCase {
            name: "a larger maxSkew waters the differences down",
            args: None,
            setup: |_| {},
            pod: soft_foo(5, ZONE),
            nodes: zones(),
            existing: vec![foo("f1", "n1"), foo("f2", "n1"), foo("f3", "n2")],
            want: Some((vec![8, 8, 4], vec![50, 50, 100])),
        },
        ScoreCase {
            name: "system defaults spread a Service's pods over hosts and zones",
            args: None,
            setup: web_service,
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![web("w1", "n1"), web("w2", "n1"), web("w3", "n3")],
            want: Some((vec![12, 9, 9], vec![75, 100, 100])),
        },
        ScoreCase {
            name: "system defaults keep nodes without a zone label",
            args: None,
            setup: web_service,
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: vec![node("n1", "a"), node("n2", "")],
            existing: vec![web("w1", "n2")],
            want: Some((vec![6, 3], vec![50, 100])),
        },
        ScoreCase {
            name: "system defaults without a Service or controller: nothing to spread",
            args: None,
            setup: |_| {},
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![web("w1", "n1")],
            want: None,
        },
        ScoreCase {
            name: "List defaults take the ReplicaSet's selector",
            args: Some(serde_json::json!({
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}
                ]
            })),
            setup: |store| {
                store.replica_sets.upsert(apps::ReplicaSet {
                    metadata: meta("default", "rs"),
                    spec: apps::ReplicaSetSpec {
                        selector: selector(&[("app", "foo")]),
                        ..Default::default()
                    },
                    ..Default::default()
                });
            },
            pod: PodBuilder::new("p")
                .label("app", "foo")
                .owner("ReplicaSet", "rs"),
            nodes: zones(),
            existing: vec![foo("f1", "n1"), foo("f2", "n1"), foo("f3", "n2")],
            want: Some((vec![4, 4, 0], vec![0, 0, 100])),
        },
        ScoreCase {
            name: "only hard constraints: nothing to score",
            args: None,
            setup: web_service,
            pod: hard_foo(1, ZONE).label("app", "web"),
            nodes: zones(),
            existing: vec![],
            want: None,
        },
        ScoreCase {
            name: "nodeAffinityPolicy Honor: pods on nodes the pod cannot use do not count",
            args: None,
            setup: |_| {},
            pod: honour_pod(None),
            nodes: vec![node("n1", "a"), node("n2", "b"), node("n3", "c")],
            existing: vec![
                foo("f1", "n1"),
                foo("f2", "n3"),
                foo("f3", "n3"),
                foo("f4", "n3"),
            ],
            want: Some((vec![2, 0, 0], vec![0, 100, 100])),
        },
        ScoreCase {
            name: "nodeAffinityPolicy Ignore: they count",
            args: None,
            setup: |_| {},
            pod: honour_pod(Some("Ignore")),
            nodes: vec![node("n1", "a"), node("n2", "b"), node("n3", "c")],
            existing: vec![
                foo("f1", "n1"),
                foo("f2", "n3"),
                foo("f3", "n3"),
                foo("f4", "n3"),
            ],
            want: Some((vec![2, 0, 5], vec![60, 100, 0])),
        },
    ];
    for case in cases {
        check_score(case);
    }
}

#[test]
fn default_selector_merges_services_and_the_controller() {
    let store = ObjectStore::default();
    service(&store, "default", "by-app", &[("app", "web")]);
    service(&store, "default", "by-tier", &[("tier", "front")]);
    service(&store, "default", "not-ours", &[("app", "db")]);
    service(
        &store,
        "other",
        "elsewhere",
        &[("app", "web"), ("zone", "x")],
    );
    store.services.upsert(api::Service {
        metadata: meta("default", "headless"),
        spec: Some(api::ServiceSpec::default()),
        ..Default::default()
    });
    store.stateful_sets.upsert(apps::StatefulSet {
        metadata: meta("default", "ss"),
        spec: apps::StatefulSetSpec {
            selector: kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_expressions: Some(vec![
                    kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                        key: "shard".into(),
                        operator: "Exists".into(),
                        values: None,
                    },
                ]),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    });
    store
        .replication_controllers
        .upsert(api::ReplicationController {
            metadata: meta("default", "rc"),
            spec: Some(api::ReplicationControllerSpec {
                selector: Some(map(&[("rc", "yes")])),
                ..Default::default()
            }),
            ..Default::default()
        });
    let labels = [
        ("app", "web"),
        ("tier", "front"),
        ("shard", "1"),
        ("rc", "yes"),
    ];
    let keys = |pod: PodBuilder| -> Vec<String> {
        default_selector(&pod.info(), &store)
            .requirements
            .iter()
            .map(|r| r.key.clone())
            .collect()
    };
    // Services only.
    assert_eq!(keys(PodBuilder::new("p").labels(&labels)), ["app", "tier"]);
    // A StatefulSet controller adds its requirements.
    assert_eq!(
        keys(
            PodBuilder::new("p")
                .labels(&labels)
                .owner("StatefulSet", "ss")
        ),
        ["app", "tier", "shard"]
    );
    // A ReplicationController (core/v1) adds its map.
    let rc_owned = PodBuilder::new("p")
        .labels(&labels)
        .owner("ReplicationController", "rc")
        .with(|p| {
            for o in p.metadata.owner_references.iter_mut().flatten() {
                o.api_version = "v1".into();
            }
        });
    assert_eq!(keys(rc_owned), ["app", "rc", "tier"]);
    // An owner that is not the controller, or of another kind, adds nothing.
    let not_controller = PodBuilder::new("p")
        .labels(&labels)
        .owner("StatefulSet", "ss")
        .with(|p| {
            for o in p.metadata.owner_references.iter_mut().flatten() {
                o.controller = Some(false);
            }
        });
    assert_eq!(keys(not_controller), ["app", "tier"]);
    assert_eq!(
        keys(PodBuilder::new("p").labels(&labels).owner("Job", "j")),
        ["app", "tier"]
    );
    // Nothing selects a pod in another namespace without services.
    assert!(keys(PodBuilder::new("p").namespace("lonely").labels(&labels)).is_empty());
}

fn hint_of(
    events: &[ClusterEventWithHint],
    resource: EventResource,
) -> kubesched_framework::events::QueueingHintFn {
    events
        .iter()
        .find(|e| e.event.resource == resource)
        .and_then(|e| e.hint.clone())
        .expect("a hinted event")
}

fn plugin() -> PodTopologySpread {
    PodTopologySpread::new(&PodTopologySpreadArgs::default(), &Handle::default()).expect("plugin")
}

#[test]
fn registers_pod_and_node_events() {
    let labels: Vec<String> = plugin()
        .events_to_register()
        .iter()
        .map(|e| e.event.label())
        .collect();
    assert_eq!(
        labels,
        [
            // v1.37 (#135905): bound pods, and the pod's own tolerations.
            "AssignedPodAdd|Delete|UpdatePodLabel",
            "TargetPodUpdatePodToleration",
            "NodeAdd|Delete|UpdateNodeLabel|UpdateNodeTaint"
        ]
    );
}

#[test]
fn pod_hint() {
    let hint = hint_of(&plugin().events_to_register(), EventResource::AssignedPod);
    let pod = PodBuilder::new("p")
        .label("app", "foo")
        .spread_constraint_full(api::TopologySpreadConstraint {
            node_taints_policy: Some("Honor".into()),
            ..constraint(1, ZONE, "DoNotSchedule", &[("app", "foo")])
        });
    let target = pod.clone().info();
    let assigned = |name: &str, app: &str| {
        EventObject::Pod(PodBuilder::new(name).node("n1").label("app", app).info())
    };
    use QueueingHint::{Queue, Skip};
    let tolerating = EventObject::Pod(pod.clone().toleration("dedicated", "Exists", "", "").info());
    let cases: Vec<(&str, Option<EventObject>, Option<EventObject>, QueueingHint)> = vec![
        (
            "an assigned matching pod was added",
            None,
            Some(assigned("a", "foo")),
            Queue,
        ),
        (
            "an assigned pod of another app was added",
            None,
            Some(assigned("a", "bar")),
            Skip,
        ),
        (
            "an unassigned pod was added",
            None,
            Some(EventObject::Pod(
                PodBuilder::new("u").label("app", "foo").info(),
            )),
            Skip,
        ),
        (
            "a pod of another namespace was added",
            None,
            Some(EventObject::Pod(foo("o", "n1").namespace("other").info())),
            Skip,
        ),
        (
            "a matching pod was deleted",
            Some(assigned("a", "foo")),
            None,
            Queue,
        ),
        (
            "another app's pod was deleted",
            Some(assigned("a", "bar")),
            None,
            Skip,
        ),
        (
            "relabelled into the selector",
            Some(assigned("a", "bar")),
            Some(assigned("a", "foo")),
            Queue,
        ),
        (
            "relabelled out of it",
            Some(assigned("a", "foo")),
            Some(assigned("a", "bar")),
            Queue,
        ),
        (
            "labels unchanged",
            Some(assigned("a", "foo")),
            Some(assigned("a", "foo")),
            Skip,
        ),
        (
            "relabelled without effect",
            Some(assigned("a", "bar")),
            Some(assigned("a", "baz")),
            Skip,
        ),
        (
            "the pod itself got a toleration under nodeTaintsPolicy Honor",
            Some(EventObject::Pod(target.clone())),
            Some(tolerating),
            Queue,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(
            hint(&target, old.as_ref(), new.as_ref()),
            Ok(want),
            "{name}"
        );
    }
}

#[test]
fn node_hint() {
    let hint = hint_of(&plugin().events_to_register(), EventResource::Node);
    let pod = hard_foo(1, ZONE).info();
    let n = |b: NodeBuilder| EventObject::Node(b.model());
    use QueueingHint::{Queue, Skip};
    let cases: Vec<(&str, Option<EventObject>, Option<EventObject>, QueueingHint)> = vec![
        ("added with the key", None, Some(n(node("n", "a"))), Queue),
        ("added without it", None, Some(n(node("n", ""))), Skip),
        ("deleted with the key", Some(n(node("n", "a"))), None, Queue),
        ("deleted without it", Some(n(node("n", ""))), None, Skip),
        (
            "gained the key",
            Some(n(node("n", ""))),
            Some(n(node("n", "a"))),
            Queue,
        ),
        (
            "moved zone",
            Some(n(node("n", "a"))),
            Some(n(node("n", "b"))),
            Queue,
        ),
        (
            "taints changed",
            Some(n(node("n", "a"))),
            Some(n(node("n", "a").taint("k", "v", "NoSchedule"))),
            Queue,
        ),
        (
            "an unrelated label changed",
            Some(n(node("n", "a"))),
            Some(n(node("n", "a").label("rack", "1"))),
            Skip,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(hint(&pod, old.as_ref(), new.as_ref()), Ok(want), "{name}");
    }
}

fn decode(value: serde_json::Value) -> Result<serde_json::Value, String> {
    let desc = registry::find(NAME).expect("registered");
    (desc.args.decode)(Some(&value), &kubesched_framework::FeatureGates::defaults())
        .map(|d| d.effective.expect("typed args"))
        .map_err(|e| e.to_string())
}

#[test]
fn args_defaults_round_trip_and_validation() {
    let desc = registry::find(NAME).expect("registered");
    let defaults =
        (desc.args.decode)(None, &kubesched_framework::FeatureGates::defaults()).expect("defaults");
    assert_eq!(
        defaults.effective,
        Some(serde_json::json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "PodTopologySpreadArgs",
            "defaultConstraints": [],
            "defaultingType": "System",
        }))
    );
    let listed = serde_json::json!({
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "nodeTaintsPolicy": "Honor"},
            {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"}
        ]
    });
    let mut effective = decode(listed.clone()).expect("valid");
    let obj = effective.as_object_mut().expect("object");
    obj.remove("kind");
    obj.remove("apiVersion");
    assert_eq!(effective, listed);
    let args: PodTopologySpreadArgs = serde_json::from_value(listed).expect("decodes");
    assert_eq!(args.defaulting_type, DefaultingType::List);
    assert_eq!(args.default_constraints.len(), 2);
    kubesched_testing::assert_args_round_trip(NAME, &args);

    let c = |extra: serde_json::Value| {
        let mut base = serde_json::json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"});
        for (k, v) in extra.as_object().expect("object") {
            base[k] = v.clone();
        }
        base
    };
    let list = |cs: Vec<serde_json::Value>| serde_json::json!({"defaultingType": "List", "defaultConstraints": cs});
    let bad = [
        (
            serde_json::json!({"defaultConstraints": [c(serde_json::json!({}))]}),
            "defaultingType: Invalid value: \"System\": when .defaultConstraints are not empty",
        ),
        (
            list(vec![c(serde_json::json!({"maxSkew": 0}))]),
            "defaultConstraints[0].maxSkew",
        ),
        (
            list(vec![c(serde_json::json!({"topologyKey": ""}))]),
            "defaultConstraints[0].topologyKey: Required value",
        ),
        (
            list(vec![c(serde_json::json!({"topologyKey": "-bad-"}))]),
            "defaultConstraints[0].topologyKey: Invalid value",
        ),
        (
            list(vec![c(
                serde_json::json!({"whenUnsatisfiable": "Sometimes"}),
            )]),
            "defaultConstraints[0].whenUnsatisfiable: Unsupported value",
        ),
        (
            list(vec![c(
                serde_json::json!({"labelSelector": {"matchLabels": {"a": "b"}}}),
            )]),
            "defaultConstraints[0].labelSelector: Forbidden",
        ),
        (
            list(vec![
                c(serde_json::json!({})),
                c(serde_json::json!({"maxSkew": 3})),
            ]),
            "defaultConstraints[1]: Duplicate value",
        ),
        (
            list(vec![c(serde_json::json!({"nodeAffinityPolicy": "Maybe"}))]),
            "nodeAffinityPolicy",
        ),
        (
            serde_json::json!({"defaultingType": "Sometimes"}),
            "defaultingType: Unsupported value",
        ),
        (
            serde_json::json!({"defaultConstraint": []}),
            "defaultConstraint",
        ),
    ];
    for (value, want) in bad {
        let err = decode(value.clone()).expect_err("refused");
        assert!(err.contains(want), "{value}: {err}");
    }
    // Several problems are reported together.
    let err = decode(list(vec![c(
        serde_json::json!({"maxSkew": 0, "topologyKey": ""}),
    )]))
    .expect_err("refused");
    assert!(
        err.contains("maxSkew") && err.contains("topologyKey"),
        "{err}"
    );
}

#[test]
fn system_defaults_are_upstreams() {
    let d = system_default_constraints();
    let summary: Vec<(i32, &str, &str)> = d
        .iter()
        .map(|c| {
            (
                c.max_skew,
                c.topology_key.as_str(),
                c.when_unsatisfiable.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [(3, HOSTNAME, "ScheduleAnyway"), (5, ZONE, "ScheduleAnyway")]
    );
}

#[test]
fn snapshot_filter() {
    let h = harness();
    let r = run(
        &h,
        hard_foo(1, ZONE),
        vec![
            node("n1", "a"),
            node("n2", "a"),
            node("n3", "b"),
            node("n4", ""),
        ],
        vec![foo("f1", "n1"), foo("f2", "n2"), foo("f3", "n3")],
    );
    insta::assert_yaml_snapshot!(r);
}

#[test]
fn snapshot_score_system_defaults() {
    let h = harness_with(None, web_service);
    let r = run(
        &h,
        PodBuilder::new("p").label("app", "web"),
        vec![
            node("n1", "a"),
            node("n2", "a"),
            node("n3", "b"),
            node("n4", ""),
        ],
        vec![
            web("w1", "n1"),
            web("w2", "n1"),
            web("w3", "n3"),
            web("w4", "n4"),
        ],
    );
    insta::assert_yaml_snapshot!(r);
}

/// PreFilter and PreScore keep per-node counts from one cycle to the next. Under a long
/// run of random changes (pods coming and going, nodes relabelled, added, removed and
/// reordered) and incoming pods of several shapes, one long-lived plugin must answer
/// exactly as a plugin built fresh for each cycle.
#[test]
fn kept_counts_answer_as_a_fresh_plugin_would() {
    let with_service = |store: &ObjectStore| service(store, "default", "svc", &[("app", "foo")]);
    let kept = harness_with(None, with_service);
    let mut churn = Churn::new(7, &["z1", "z2", "z3"]);
    let mut nodes: Vec<Arc<NodeInfo>> = (0..24).map(|_| churn.node()).collect();
    let mut make_pod = |c: &mut Churn, node: &str| {
        let name = c.name("pod");
        let p = PodBuilder::new(&name).node(node);
        match c.below(4) {
            0 => p.label("app", "foo"),
            1 => p.label("app", "bar"),
            2 => p.label("app", "foo").namespace("other"),
            _ => p,
        }
    };
    let incoming = [
        hard_foo(1, ZONE),
        hard_foo(2, HOSTNAME).spread_constraint(1, ZONE, "DoNotSchedule", &[("app", "foo")]),
        PodBuilder::new("p").spread_constraint(1, ZONE, "ScheduleAnyway", &[("app", "foo")]),
        // System defaults (hostname and zone, soft) through the Service's selector.
        PodBuilder::new("p").label("app", "foo"),
        hard_foo(1, ZONE).node_affinity(ZONE, "In", &["z1", "z2"]),
    ]
    .map(PodBuilder::info);
    for step in 0..400 {
        churn.step(&mut nodes, &mut make_pod);
        let pod = &incoming[churn.below(incoming.len())];
        let fresh = harness_with(None, with_service);
        assert_eq!(
            kept.run_as_is(pod, &nodes),
            fresh.run_as_is(pod, &nodes),
            "step {step}"
        );
    }
}

// ---------------------------------------------------------------- Remedies (explain)

#[test]
fn remedies_give_the_skew_each_broken_constraint_would_reach() {
    let h = harness();
    // zone a: 2 pods, zone b: 0, zone c: 1 → min 0. A pod in a makes skew 3, in c 2.
    let nodes = vec![
        node("n-a", "a"),
        node("n-b", "b"),
        node("n-c", "c"),
        node("bare", ""),
    ];
    let existing = [foo("p1", "n-a"), foo("p2", "n-a"), foo("p3", "n-c")];
    let pods: Vec<Arc<PodInfo>> = existing.into_iter().map(PodBuilder::info).collect();
    let got = h.remedies(&hard_foo(1, ZONE).info(), &node_infos(nodes, &pods));
    assert_eq!(
        got,
        vec![
            (
                "n-a".to_string(),
                vec![format!("{ZONE}=a spread skew would be 3 > maxSkew 1")]
            ),
            (
                "n-c".to_string(),
                vec![format!("{ZONE}=c spread skew would be 2 > maxSkew 1")]
            ),
            (
                "bare".to_string(),
                vec![format!("node has no {ZONE} label")]
            ),
        ]
    );
}

#[test]
fn node_taints_policy_honor_compares_numeric_tolerations_behind_their_gate() {
    // TaintTolerationComparisonOperators (alpha from v1.35, off by default): with it on,
    // a `Gt` toleration lets a node whose taint value is a greater integer count as a
    // domain member under nodeTaintsPolicy Honor; off, the node stays out.
    let pod = PodBuilder::new("p")
        .label("app", "foo")
        .toleration("capacity", "Gt", "5", "NoSchedule")
        .spread_constraint_full(api::TopologySpreadConstraint {
            node_taints_policy: Some("Honor".into()),
            ..constraint(1, ZONE, "DoNotSchedule", &[("app", "foo")])
        })
        .info();
    let big = node("n1", "a")
        .taint("capacity", "10", "NoSchedule")
        .model();
    let small = node("n2", "b").taint("capacity", "2", "NoSchedule").model();
    for (gate, want_big) in [(false, false), (true, true)] {
        let gates = kubesched_framework::FeatureGates::defaults()
            .with(
                kubesched_framework::Feature::TaintTolerationComparisonOperators,
                gate,
            )
            .expect("alpha gate");
        let handle = Handle::builder().features(gates).build();
        let pl = PodTopologySpread::new(&PodTopologySpreadArgs::default(), &handle).expect("valid");
        let constraints = pl.constraints(&pod, WhenUnsatisfiable::DoNotSchedule);
        assert_eq!(constraints.len(), 1);
        assert_eq!(
            constraints[0].includes_node(&pod, &big),
            want_big,
            "gate {gate}"
        );
        assert!(!constraints[0].includes_node(&pod, &small), "gate {gate}");
    }
}
