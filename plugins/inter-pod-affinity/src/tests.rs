//! Table tests per extension point, AddPod/RemovePod through the framework, hints, args,
//! a many-node check that Filter only reads precomputed state, and snapshots.

use std::sync::Arc;

use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{CycleState, Handle, HandleBuilder, ObjectStore, registry};
use kubesched_testing::{
    Churn, NodeBuilder, PluginHarness, PluginRun, PodBuilder, node_infos, selector,
};

use super::*;
use crate::filtering::PreFilterState;

const HOST: &str = "kubernetes.io/hostname";
const ZONE: &str = "topology.kubernetes.io/zone";

type NamespaceSpec<'a> = (&'a str, &'a [(&'a str, &'a str)]);

fn handle(namespaces: &[NamespaceSpec<'_>]) -> HandleBuilder {
    let store = ObjectStore::default();
    for (name, labels) in namespaces {
        store.namespaces.upsert(api::Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        });
    }
    Handle::builder().objects(Arc::new(store))
}

fn harness(args: Option<serde_json::Value>, namespaces: &[NamespaceSpec<'_>]) -> PluginHarness {
    PluginHarness::from_registry(NAME, args, handle(namespaces)).expect("plugin is registered")
}

fn node(name: &str, zone: &str) -> NodeBuilder {
    let n = NodeBuilder::new(name);
    if zone.is_empty() { n } else { n.zone(zone) }
}

/// A pod bound to a node.
fn on(name: &str, node: &str) -> PodBuilder {
    PodBuilder::new(name).node(node)
}

/// An affinity term over pods with `labels`.
fn term(labels: &[(&str, &str)], key: &str) -> api::PodAffinityTerm {
    api::PodAffinityTerm {
        label_selector: Some(selector(labels)),
        topology_key: key.into(),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Pass,
    Affinity,
    Anti,
    Existing,
}

fn filter_outcome(run: &PluginRun, node: &str) -> Want {
    match run.filter_of(node) {
        None => Want::Pass,
        Some(s) => match (s.code.as_str(), s.reasons.first().map(String::as_str)) {
            ("Success", _) => Want::Pass,
            ("UnschedulableAndUnresolvable", Some(ERR_REASON_AFFINITY)) => Want::Affinity,
            ("Unschedulable", Some(ERR_REASON_ANTI_AFFINITY)) => Want::Anti,
            ("Unschedulable", Some(ERR_REASON_EXISTING_ANTI_AFFINITY)) => Want::Existing,
            other => panic!("unexpected filter status on {node}: {other:?}"),
        },
    }
}

struct FilterCase<'a> {
    name: &'a str,
    namespaces: &'a [NamespaceSpec<'a>],
    pod: PodBuilder,
    nodes: Vec<NodeBuilder>,
    existing: Vec<PodBuilder>,
    want: Vec<Want>,
}

fn check_filter(case: FilterCase<'_>) {
    let h = harness(None, case.namespaces);
    let names: Vec<String> = case
        .nodes
        .iter()
        .map(|n| n.clone().build().metadata.name.unwrap_or_default())
        .collect();
    let r = run(&h, case.pod, case.nodes, case.existing);
    let got: Vec<Want> = names.iter().map(|n| filter_outcome(&r, n)).collect();
    assert_eq!(got, case.want, "{}", case.name);
}

#[test]
fn filter_table() {
    use Want::*;
    let zones = || vec![node("n1", "a"), node("n2", "a"), node("n3", "b")];
    let cases = vec![
        FilterCase {
            name: "affinity to a pod on the same host",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_affinity(&[("app", "db")], HOST),
            nodes: vec![node("n1", "a"), node("n2", "a")],
            existing: vec![on("db", "n1").label("app", "db")],
            want: vec![Pass, Affinity],
        },
        FilterCase {
            name: "affinity by zone accepts every node of the zone",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_affinity(&[("app", "db")], ZONE),
            nodes: zones(),
            existing: vec![on("db", "n1").label("app", "db")],
            want: vec![Pass, Pass, Affinity],
        },
        FilterCase {
            name: "affinity nobody matches, not even the pod itself",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_affinity(&[("app", "db")], ZONE),
            nodes: zones(),
            existing: vec![on("web", "n1").label("app", "web")],
            want: vec![Affinity, Affinity, Affinity],
        },
        FilterCase {
            name: "first pod of a self-affine group goes to any node with the key",
            namespaces: &[],
            pod: PodBuilder::new("p")
                .label("app", "web")
                .pod_affinity(&[("app", "web")], ZONE),
            nodes: vec![node("n1", "a"), node("n2", "b"), node("n3", "")],
            existing: vec![],
            want: vec![Pass, Pass, Affinity],
        },
        FilterCase {
            name: "once a group member runs, the exception no longer applies",
            namespaces: &[],
            pod: PodBuilder::new("p")
                .label("app", "web")
                .pod_affinity(&[("app", "web")], ZONE),
            nodes: vec![node("n1", "a"), node("n2", "b")],
            existing: vec![on("web", "n1").label("app", "web")],
            want: vec![Pass, Affinity],
        },
        FilterCase {
            name: "one pod must match every affinity term",
            namespaces: &[],
            pod: PodBuilder::new("p")
                .pod_affinity(&[("app", "db")], ZONE)
                .pod_affinity(&[("tier", "back")], ZONE),
            nodes: zones(),
            existing: vec![
                on("db", "n1").label("app", "db"),
                on("back", "n3").label("tier", "back"),
            ],
            want: vec![Affinity, Affinity, Affinity],
        },
        FilterCase {
            name: "a pod matching every term satisfies them in its zone",
            namespaces: &[],
            pod: PodBuilder::new("p")
                .pod_affinity(&[("app", "db")], ZONE)
                .pod_affinity(&[("tier", "back")], HOST),
            nodes: zones(),
            existing: vec![on("db", "n1").labels(&[("app", "db"), ("tier", "back")])],
            want: vec![Pass, Affinity, Affinity],
        },
        FilterCase {
            name: "affinity term namespaces: only pods there count",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_affinity_term(api::PodAffinityTerm {
                namespaces: Some(vec!["other".into()]),
                ..term(&[("app", "db")], HOST)
            }),
            nodes: vec![node("n1", "a"), node("n2", "a")],
            existing: vec![
                on("db", "n1").label("app", "db"),
                on("db2", "n2").namespace("other").label("app", "db"),
            ],
            want: vec![Affinity, Pass],
        },
        FilterCase {
            name: "namespace selector picks namespaces by their labels",
            namespaces: &[("ns-a", &[("team", "a")]), ("ns-b", &[("team", "b")])],
            pod: PodBuilder::new("p").pod_affinity_term(api::PodAffinityTerm {
                namespace_selector: Some(selector(&[("team", "a")])),
                ..term(&[("app", "db")], HOST)
            }),
            nodes: vec![node("n1", "a"), node("n2", "a")],
            existing: vec![
                on("db", "n1").namespace("ns-b").label("app", "db"),
                on("db", "n2").namespace("ns-a").label("app", "db"),
            ],
            want: vec![Affinity, Pass],
        },
        FilterCase {
            name: "an empty namespace selector covers every namespace",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_affinity_term(api::PodAffinityTerm {
                namespace_selector: Some(selector(&[])),
                ..term(&[("app", "db")], HOST)
            }),
            nodes: vec![node("n1", "a"), node("n2", "a")],
            existing: vec![on("db", "n1").namespace("elsewhere").label("app", "db")],
            want: vec![Pass, Affinity],
        },
        FilterCase {
            name: "anti-affinity keeps the pod out of the zone",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_anti_affinity(&[("app", "db")], ZONE),
            nodes: zones(),
            existing: vec![on("db", "n1").label("app", "db")],
            want: vec![Anti, Anti, Pass],
        },
        FilterCase {
            name: "anti-affinity by host only rejects that host",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_anti_affinity(&[("app", "db")], HOST),
            nodes: zones(),
            existing: vec![on("db", "n1").label("app", "db")],
            want: vec![Anti, Pass, Pass],
        },
        FilterCase {
            name: "a node without the anti-affinity key is fine",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_anti_affinity(&[("app", "db")], ZONE),
            nodes: vec![node("n1", "a"), node("n2", "")],
            existing: vec![
                on("db", "n1").label("app", "db"),
                on("db2", "n2").label("app", "db"),
            ],
            want: vec![Anti, Pass],
        },
        FilterCase {
            name: "anti-affinity in another namespace does not count",
            namespaces: &[],
            pod: PodBuilder::new("p").pod_anti_affinity(&[("app", "db")], ZONE),
            nodes: zones(),
            existing: vec![on("db", "n1").namespace("other").label("app", "db")],
            want: vec![Pass, Pass, Pass],
        },
        FilterCase {
            name: "an existing pod's anti-affinity keeps the pod out of its zone",
            namespaces: &[],
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![on("db", "n1").pod_anti_affinity(&[("app", "web")], ZONE)],
            want: vec![Existing, Existing, Pass],
        },
        FilterCase {
            name: "an existing pod's anti-affinity that does not match the pod",
            namespaces: &[],
            pod: PodBuilder::new("p").label("app", "api"),
            nodes: zones(),
            existing: vec![on("db", "n1").pod_anti_affinity(&[("app", "web")], ZONE)],
            want: vec![Pass, Pass, Pass],
        },
        FilterCase {
            name: "an existing pod's namespace selector reads the incoming pod's namespace labels",
            namespaces: &[("prod", &[("env", "prod")]), ("dev", &[("env", "dev")])],
            pod: PodBuilder::new("p").namespace("prod").label("app", "web"),
            nodes: zones(),
            existing: vec![on("db", "n3").namespace("data").pod_anti_affinity_term(
                api::PodAffinityTerm {
                    namespace_selector: Some(selector(&[("env", "prod")])),
                    ..term(&[("app", "web")], ZONE)
                },
            )],
            want: vec![Pass, Pass, Existing],
        },
        FilterCase {
            name: "the same selector lets a pod of another namespace in",
            namespaces: &[("prod", &[("env", "prod")]), ("dev", &[("env", "dev")])],
            pod: PodBuilder::new("p").namespace("dev").label("app", "web"),
            nodes: zones(),
            existing: vec![on("db", "n3").namespace("data").pod_anti_affinity_term(
                api::PodAffinityTerm {
                    namespace_selector: Some(selector(&[("env", "prod")])),
                    ..term(&[("app", "web")], ZONE)
                },
            )],
            want: vec![Pass, Pass, Pass],
        },
        FilterCase {
            name: "affinity, anti-affinity and symmetry together, first failure wins",
            namespaces: &[],
            pod: PodBuilder::new("p")
                .label("app", "web")
                .pod_affinity(&[("app", "db")], ZONE)
                .pod_anti_affinity(&[("app", "web")], HOST),
            nodes: vec![
                node("n1", "a"),
                node("n2", "a"),
                node("n3", "a"),
                node("n4", "b"),
            ],
            existing: vec![
                on("db", "n1").label("app", "db"),
                on("web", "n2").label("app", "web"),
                on("cache", "n3").pod_anti_affinity(&[("app", "web")], HOST),
            ],
            want: vec![Pass, Anti, Existing, Affinity],
        },
    ];
    for case in cases {
        check_filter(case);
    }
}

#[test]
fn pre_filter_skips_without_terms_or_existing_anti_affinity() {
    let h = harness(None, &[]);
    let r = run(
        &h,
        PodBuilder::new("p").label("app", "web"),
        vec![node("n1", "a")],
        vec![on("db", "n1").pod_anti_affinity(&[("app", "other")], ZONE)],
    );
    assert_eq!(r.pre_filter.as_ref().map(|s| s.code.as_str()), Some("Skip"));
    assert!(r.filter_of("n1").is_none());
}

#[test]
fn filter_without_pre_filter_is_an_error() {
    let h = harness(None, &[]);
    let nodes = h.set_nodes(&node_infos(vec![node("n1", "a")], &[]));
    let pod = PodBuilder::new("p").info();
    let s = h
        .plugin()
        .as_filter()
        .expect("filter")
        .filter(&CycleState::new(), &pod, &nodes[0]);
    assert!(s.is_error(), "{s:?}");
}

/// Runs PreFilter through a one-plugin framework and returns it with the state.
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

fn with_pod(info: &NodeInfo, pod: &Arc<PodInfo>) -> NodeInfo {
    let mut n = info.clone();
    n.add_pod(pod.clone());
    n
}

#[test]
fn add_and_remove_pod_keep_counts_exact() {
    let h = harness(None, &[]);
    let nodes = h.set_nodes(&node_infos(
        vec![node("n1", "a"), node("n2", "a"), node("n3", "b")],
        &[],
    ));
    let pod = PodBuilder::new("p")
        .label("app", "web")
        .pod_anti_affinity(&[("app", "db")], ZONE)
        .info();
    let (fw, mut state) = framework_state(&h, &pod, &nodes);
    let before = state.read::<PreFilterState>().expect("state").clone();
    for n in &nodes {
        assert!(fw.run_filter_plugins(&state, &pod, n).is_success());
    }

    // A db pod nominated to n1 closes zone a to the pod.
    let db = on("db", "n1").label("app", "db").info();
    let n1 = with_pod(&nodes[0], &db);
    assert!(
        fw.run_pre_filter_extension_add_pod(&mut state, &pod, &db, &n1)
            .is_success()
    );
    let s = fw.run_filter_plugins(&state, &pod, &nodes[1]);
    assert_eq!(s.reasons(), [ERR_REASON_ANTI_AFFINITY]);
    assert!(fw.run_filter_plugins(&state, &pod, &nodes[2]).is_success());

    // A pod whose anti-affinity matches ours, added in zone b, closes zone b too.
    let guard = on("guard", "n3")
        .pod_anti_affinity(&[("app", "web")], ZONE)
        .info();
    let n3 = with_pod(&nodes[2], &guard);
    assert!(
        fw.run_pre_filter_extension_add_pod(&mut state, &pod, &guard, &n3)
            .is_success()
    );
    let s = fw.run_filter_plugins(&state, &pod, &nodes[2]);
    assert_eq!(s.reasons(), [ERR_REASON_EXISTING_ANTI_AFFINITY]);

    // Removing both (preemption victims) gives back exactly the PreFilter counts.
    assert!(
        fw.run_pre_filter_extension_remove_pod(&mut state, &pod, &db, &nodes[0])
            .is_success()
    );
    assert!(
        fw.run_pre_filter_extension_remove_pod(&mut state, &pod, &guard, &nodes[2])
            .is_success()
    );
    let after = state.read::<PreFilterState>().expect("state");
    assert_eq!(after.anti_affinity, before.anti_affinity);
    assert_eq!(after.existing_anti_affinity, before.existing_anti_affinity);
    assert!(after.anti_affinity.is_empty() && after.existing_anti_affinity.is_empty());
    for n in &nodes {
        assert!(fw.run_filter_plugins(&state, &pod, n).is_success());
    }
}

#[test]
fn removing_the_only_match_fails_affinity_and_adding_restores_it() {
    let h = harness(None, &[]);
    let db = on("db", "n1").label("app", "db").info();
    let nodes = h.set_nodes(&node_infos(
        vec![node("n1", "a"), node("n2", "b")],
        std::slice::from_ref(&db),
    ));
    let pod = PodBuilder::new("p")
        .pod_affinity(&[("app", "db")], ZONE)
        .info();
    let (fw, mut state) = framework_state(&h, &pod, &nodes);
    assert!(fw.run_filter_plugins(&state, &pod, &nodes[0]).is_success());
    assert_eq!(
        state
            .read::<PreFilterState>()
            .expect("state")
            .affinity
            .sorted(),
        vec![(ZONE.to_string(), "a".to_string(), 1)]
    );

    // Preemption considers evicting the db pod: the affinity can no longer be met.
    let mut n1 = (*nodes[0]).clone();
    n1.remove_pod(&db.uid);
    assert!(
        fw.run_pre_filter_extension_remove_pod(&mut state, &pod, &db, &n1)
            .is_success()
    );
    let s = fw.run_filter_plugins(&state, &pod, &n1);
    assert_eq!(s.reasons(), [ERR_REASON_AFFINITY]);
    assert_eq!(
        s.code(),
        kubesched_framework::Code::UnschedulableAndUnresolvable
    );
    assert!(
        state
            .read::<PreFilterState>()
            .expect("state")
            .affinity
            .is_empty()
    );

    // A matching nominated pod in zone b satisfies it there.
    let db2 = on("db2", "n2").label("app", "db").info();
    let n2 = with_pod(&nodes[1], &db2);
    assert!(
        fw.run_pre_filter_extension_add_pod(&mut state, &pod, &db2, &n2)
            .is_success()
    );
    assert!(fw.run_filter_plugins(&state, &pod, &nodes[1]).is_success());
    assert!(!fw.run_filter_plugins(&state, &pod, &n1).is_success());
}

#[test]
fn extensions_without_pre_filter_state_are_errors() {
    let h = harness(None, &[]);
    let nodes = h.set_nodes(&node_infos(vec![node("n1", "a")], &[]));
    let pod = PodBuilder::new("p").info();
    let other = on("o", "n1").info();
    let pf = h.plugin().as_pre_filter().expect("pre-filter");
    let ext = pf.pre_filter_extensions().expect("extensions");
    assert!(
        ext.add_pod(&mut CycleState::new(), &pod, &other, &nodes[0])
            .is_error()
    );
    assert!(
        ext.remove_pod(&mut CycleState::new(), &pod, &other, &nodes[0])
            .is_error()
    );
}

/// The performance contract: PreFilter folds every pod into a few topology pairs once,
/// and Filter answers from those pairs and the node's labels alone.
#[test]
fn filter_reads_precomputed_pairs_not_pods() {
    const NODES: usize = 5000;
    const ZONES: usize = 50;
    let h = harness(None, &[]);
    let builders: Vec<NodeBuilder> = (0..NODES)
        .map(|i| node(&format!("n{i}"), &format!("z{}", i % ZONES)))
        .collect();
    // One pod per node: db pods on nodes 0..3 (zones z0..z2), guards with anti-affinity to
    // web pods on nodes 10..19 (by host), fillers elsewhere.
    let pods: Vec<Arc<PodInfo>> = (0..NODES)
        .map(|i| {
            let p = on(&format!("p{i}"), &format!("n{i}"));
            match i {
                0..=2 => p.label("app", "db"),
                10..=19 => p.pod_anti_affinity(&[("app", "web")], HOST),
                _ => p.label("app", "filler"),
            }
            .info()
        })
        .collect();
    let nodes = h.set_nodes(&node_infos(builders, &pods));
    let pod = PodBuilder::new("web")
        .label("app", "web")
        .pod_anti_affinity(&[("app", "db")], ZONE)
        .info();
    let plugin = h.plugin();
    let mut state = CycleState::new();
    let (_, s) = plugin
        .as_pre_filter()
        .expect("pre-filter")
        .pre_filter(&mut state, &pod, &nodes);
    assert!(s.is_success());
    let st = state.read::<PreFilterState>().expect("state");
    // 5000 pods became 3 zone pairs and 10 host pairs.
    assert_eq!(st.anti_affinity.len(), 3);
    assert_eq!(st.existing_anti_affinity.len(), 10);
    assert!(st.affinity.is_empty());

    let filter = plugin.as_filter().expect("filter");
    let mut rejected = [0usize; 2];
    for (i, info) in nodes.iter().enumerate() {
        let s = filter.filter(&state, &pod, info);
        // The same node with its pods stripped gets the same answer: Filter never looks
        // at the pods of the candidate node.
        let bare = NodeInfo::new(info.node().expect("node").clone());
        assert_eq!(filter.filter(&state, &pod, &bare), s, "node {i}");
        match s.reasons().first().map(String::as_str) {
            None => assert!(s.is_success()),
            Some(ERR_REASON_ANTI_AFFINITY) => {
                assert!(i % ZONES < 3, "node {i}");
                rejected[0] += 1;
            }
            Some(ERR_REASON_EXISTING_ANTI_AFFINITY) => {
                assert!((10..20).contains(&i), "node {i}");
                rejected[1] += 1;
            }
            Some(other) => panic!("unexpected reason {other}"),
        }
    }
    // 3 zones of 100 nodes; the guards' hosts are in zones z10..z19, not z0..z2.
    assert_eq!(rejected, [300, 10]);
}

struct ScoreCase<'a> {
    name: &'a str,
    args: Option<serde_json::Value>,
    pod: PodBuilder,
    nodes: Vec<NodeBuilder>,
    existing: Vec<PodBuilder>,
    /// None: PreScore skips.
    want: Option<(Vec<i64>, Vec<i64>)>,
}

fn check_score(case: ScoreCase<'_>) {
    let h = harness(case.args, &[]);
    let r = run(&h, case.pod, case.nodes, case.existing);
    match case.want {
        None => {
            assert_eq!(
                r.pre_score.as_ref().map(|s| s.code.as_str()),
                Some("Skip"),
                "{}",
                case.name
            );
        }
        Some((raw, normalized)) => {
            assert_eq!(
                r.pre_score.as_ref().map(|s| s.code.as_str()),
                Some("Success"),
                "{}",
                case.name
            );
            let got_raw: Vec<i64> = r.nodes.iter().filter_map(|n| n.score).collect();
            let got_norm: Vec<i64> = r.nodes.iter().filter_map(|n| n.normalized_score).collect();
            assert_eq!(got_raw, raw, "{} (raw)", case.name);
            assert_eq!(got_norm, normalized, "{} (normalized)", case.name);
        }
    }
}

#[test]
fn score_table() {
    let zones = || vec![node("n1", "a"), node("n2", "a"), node("n3", "b")];
    let cases = vec![
        ScoreCase {
            name: "no inter-pod terms anywhere: PreScore skips",
            args: None,
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![on("db", "n1").label("app", "db")],
            want: None,
        },
        ScoreCase {
            name: "preferred affinity favours the zone of matching pods",
            args: None,
            pod: PodBuilder::new("p").preferred_pod_affinity(5, &[("app", "db")], ZONE),
            nodes: zones(),
            existing: vec![on("db", "n1").label("app", "db")],
            want: Some((vec![5, 5, 0], vec![100, 100, 0])),
        },
        ScoreCase {
            name: "each matching pod adds the weight again",
            args: None,
            pod: PodBuilder::new("p").preferred_pod_affinity(5, &[("app", "db")], ZONE),
            nodes: zones(),
            existing: vec![
                on("db1", "n1").label("app", "db"),
                on("db2", "n2").label("app", "db"),
                on("db3", "n3").label("app", "db"),
            ],
            want: Some((vec![10, 10, 5], vec![100, 100, 0])),
        },
        ScoreCase {
            name: "preferred anti-affinity scores the zone down",
            args: None,
            pod: PodBuilder::new("p").preferred_pod_anti_affinity(5, &[("app", "db")], ZONE),
            nodes: zones(),
            existing: vec![on("db", "n1").label("app", "db")],
            want: Some((vec![-5, -5, 0], vec![0, 0, 100])),
        },
        ScoreCase {
            name: "affinity and anti-affinity terms add up per node",
            args: None,
            pod: PodBuilder::new("p")
                .preferred_pod_affinity(8, &[("app", "db")], ZONE)
                .preferred_pod_anti_affinity(3, &[("app", "web")], HOST),
            nodes: zones(),
            existing: vec![
                on("db", "n1").label("app", "db"),
                on("web", "n2").label("app", "web"),
            ],
            want: Some((vec![8, 5, 0], vec![100, 62, 0])),
        },
        ScoreCase {
            name: "an existing pod's hard affinity to the pod counts hardPodAffinityWeight",
            args: None,
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![on("db", "n1").pod_affinity(&[("app", "web")], ZONE)],
            want: Some((vec![1, 1, 0], vec![100, 100, 0])),
        },
        ScoreCase {
            name: "hardPodAffinityWeight scales it",
            args: Some(serde_json::json!({"hardPodAffinityWeight": 7})),
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![on("db", "n3").pod_affinity(&[("app", "web")], ZONE)],
            want: Some((vec![0, 0, 7], vec![0, 0, 100])),
        },
        ScoreCase {
            name: "hardPodAffinityWeight 0 ignores existing hard affinity",
            args: Some(serde_json::json!({"hardPodAffinityWeight": 0})),
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![on("db", "n1").pod_affinity(&[("app", "web")], ZONE)],
            want: None,
        },
        ScoreCase {
            name: "existing pods' preferred terms count both ways",
            args: None,
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![
                on("likes", "n1").preferred_pod_affinity(4, &[("app", "web")], HOST),
                on("dislikes", "n3").preferred_pod_anti_affinity(10, &[("app", "web")], ZONE),
            ],
            want: Some((vec![4, 0, -10], vec![100, 71, 0])),
        },
        ScoreCase {
            name: "ignorePreferredTermsOfExistingPods: a pod without preferred terms skips",
            args: Some(serde_json::json!({"ignorePreferredTermsOfExistingPods": true})),
            pod: PodBuilder::new("p").label("app", "web"),
            nodes: zones(),
            existing: vec![on("likes", "n1").preferred_pod_affinity(4, &[("app", "web")], HOST)],
            want: None,
        },
        ScoreCase {
            name: "ignorePreferredTermsOfExistingPods: a pod with preferred terms still scores all",
            args: Some(serde_json::json!({"ignorePreferredTermsOfExistingPods": true})),
            pod: PodBuilder::new("p")
                .label("app", "web")
                .preferred_pod_affinity(5, &[("app", "db")], ZONE),
            nodes: zones(),
            existing: vec![
                on("db", "n1").label("app", "db"),
                on("dislikes", "n3").preferred_pod_anti_affinity(2, &[("app", "web")], ZONE),
            ],
            want: Some((vec![5, 5, -2], vec![100, 100, 0])),
        },
        ScoreCase {
            name: "preferred term namespaces: pods elsewhere do not count",
            args: None,
            pod: PodBuilder::new("p").with(|p| {
                let aff = p
                    .spec
                    .get_or_insert_with(Default::default)
                    .affinity
                    .get_or_insert_with(Default::default);
                aff.pod_affinity = Some(api::PodAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(vec![
                        api::WeightedPodAffinityTerm {
                            weight: 3,
                            pod_affinity_term: api::PodAffinityTerm {
                                namespaces: Some(vec!["other".into()]),
                                ..term(&[("app", "db")], ZONE)
                            },
                        },
                    ]),
                    ..Default::default()
                });
            }),
            nodes: zones(),
            existing: vec![
                on("db", "n1").label("app", "db"),
                on("db2", "n3").namespace("other").label("app", "db"),
            ],
            want: Some((vec![0, 0, 3], vec![0, 0, 100])),
        },
        ScoreCase {
            name: "a node without the topology key scores nothing",
            args: None,
            pod: PodBuilder::new("p").preferred_pod_affinity(5, &[("app", "db")], ZONE),
            nodes: vec![node("n1", "a"), node("n2", "")],
            existing: vec![
                on("db", "n1").label("app", "db"),
                on("db2", "n2").label("app", "db"),
            ],
            want: Some((vec![5, 0], vec![100, 0])),
        },
    ];
    for case in cases {
        check_score(case);
    }
}

#[test]
fn normalize_keeps_scores_when_nothing_was_counted() {
    let h = harness(None, &[]);
    let nodes = h.set_nodes(&node_infos(vec![node("n1", "a")], &[]));
    let pod = PodBuilder::new("p").info();
    let mut state = CycleState::new();
    state.write(crate::scoring::PreScoreState {
        topology_score: Arc::default(),
    });
    let score = h.plugin().as_score().expect("score");
    let mut scores = [7];
    assert!(
        score
            .normalize_score(&state, &pod, &nodes, &mut scores)
            .is_success()
    );
    assert_eq!(scores, [7]);
    assert!(score.score(&CycleState::new(), &pod, &nodes[0]).is_err());
}

fn hint_of(
    events: &[kubesched_framework::events::ClusterEventWithHint],
    resource: EventResource,
) -> kubesched_framework::events::QueueingHintFn {
    events
        .iter()
        .find(|e| e.event.resource == resource)
        .and_then(|e| e.hint.clone())
        .expect("a hinted event")
}

#[test]
fn registers_pod_and_node_events() {
    let plugin = InterPodAffinity::new(&InterPodAffinityArgs::default(), &Handle::default())
        .expect("plugin");
    let labels: Vec<String> = plugin
        .events_to_register()
        .iter()
        .map(|e| e.event.label())
        .collect();
    assert_eq!(
        labels,
        [
            // v1.37 (#135905): other pods once bound, and the pod's own relabelling.
            "AssignedPodAdd|Delete|UpdatePodLabel",
            "TargetPodUpdatePodLabel",
            // As upstream v1.34 with queueing hints: a taint change is not registered.
            "NodeAdd|UpdateNodeLabel"
        ]
    );
}

#[test]
fn pod_hint() {
    let plugin = InterPodAffinity::new(&InterPodAffinityArgs::default(), &Handle::default())
        .expect("plugin");
    let hint = hint_of(&plugin.events_to_register(), EventResource::AssignedPod);
    let pod = PodBuilder::new("p")
        .pod_affinity(&[("app", "db")], ZONE)
        .pod_anti_affinity(&[("app", "web")], ZONE)
        .info();
    let assigned =
        |name: &str, app: &str| EventObject::Pod(on(name, "n1").label("app", app).info());
    let pending = EventObject::Pod(PodBuilder::new("q").label("app", "db").info());
    use QueueingHint::{Queue, Skip};
    let cases: Vec<(&str, Option<EventObject>, Option<EventObject>, QueueingHint)> = vec![
        (
            "added pod matches the affinity",
            None,
            Some(assigned("a", "db")),
            Queue,
        ),
        (
            "added pod does not match",
            None,
            Some(assigned("a", "api")),
            Skip,
        ),
        (
            "an unassigned pod never counts",
            None,
            Some(pending.clone()),
            Skip,
        ),
        (
            "deleted pod matched the anti-affinity",
            Some(assigned("a", "web")),
            None,
            Queue,
        ),
        ("deleted pod did not", Some(assigned("a", "db")), None, Skip),
        (
            "relabelled to match the affinity",
            Some(assigned("a", "api")),
            Some(assigned("a", "db")),
            Queue,
        ),
        (
            "relabelled away from the anti-affinity",
            Some(assigned("a", "web")),
            Some(assigned("a", "api")),
            Queue,
        ),
        (
            "relabelled without effect",
            Some(assigned("a", "api")),
            Some(assigned("a", "cache")),
            Skip,
        ),
        (
            "relabelled into the anti-affinity",
            Some(assigned("a", "api")),
            Some(assigned("a", "web")),
            Skip,
        ),
    ];
    for (name, old, new, want) in cases {
        assert_eq!(hint(&pod, old.as_ref(), new.as_ref()), Ok(want), "{name}");
    }
    let node = EventObject::Node(NodeBuilder::new("n").model());
    assert!(hint(&pod, None, Some(&node)).is_err());
}

#[test]
fn node_hint() {
    let plugin = InterPodAffinity::new(&InterPodAffinityArgs::default(), &Handle::default())
        .expect("plugin");
    let hint = hint_of(&plugin.events_to_register(), EventResource::Node);
    let pod = PodBuilder::new("p")
        .pod_anti_affinity(&[("app", "web")], ZONE)
        .info();
    let with_zone = EventObject::Node(node("n", "a").model());
    let without = EventObject::Node(node("n", "").model());
    assert_eq!(hint(&pod, None, Some(&with_zone)), Ok(QueueingHint::Queue));
    assert_eq!(hint(&pod, None, Some(&without)), Ok(QueueingHint::Skip));
    let plain = PodBuilder::new("plain").info();
    assert_eq!(hint(&plain, None, Some(&with_zone)), Ok(QueueingHint::Skip));
}

fn decode(value: Option<serde_json::Value>) -> Result<serde_json::Value, String> {
    let desc = registry::find(NAME).expect("registered");
    (desc.args.decode)(
        value.as_ref(),
        &kubesched_framework::FeatureGates::defaults(),
    )
    .map(|d| d.effective.expect("typed args"))
    .map_err(|e| e.to_string())
}

#[test]
fn args_defaults_round_trip_and_validation() {
    assert_eq!(
        decode(None).expect("defaults"),
        serde_json::json!({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "InterPodAffinityArgs",
            "hardPodAffinityWeight": 1,
            "ignorePreferredTermsOfExistingPods": false,
        })
    );
    let args = InterPodAffinityArgs {
        hard_pod_affinity_weight: 42,
        ignore_preferred_terms_of_existing_pods: true,
    };
    kubesched_testing::assert_args_round_trip(NAME, &args);

    for (bad, field) in [
        (
            serde_json::json!({"hardPodAffinityWeight": 101}),
            "hardPodAffinityWeight",
        ),
        (
            serde_json::json!({"hardPodAffinityWeight": -1}),
            "hardPodAffinityWeight",
        ),
        (
            serde_json::json!({"hardPodAffinityWeigth": 1}),
            "hardPodAffinityWeigth",
        ),
    ] {
        let err = decode(Some(bad.clone())).expect_err("refused");
        assert!(err.contains(field), "{bad}: {err}");
    }
    assert!(
        InterPodAffinity::new(
            &InterPodAffinityArgs {
                hard_pod_affinity_weight: 500,
                ..Default::default()
            },
            &Handle::default()
        )
        .is_err()
    );
}

#[test]
fn snapshot_filter() {
    let h = harness(None, &[]);
    let r = run(
        &h,
        PodBuilder::new("web")
            .label("app", "web")
            .pod_affinity(&[("app", "db")], ZONE)
            .pod_anti_affinity(&[("app", "web")], HOST),
        vec![
            node("n1", "a"),
            node("n2", "a"),
            node("n3", "a"),
            node("n4", "b"),
        ],
        vec![
            on("db", "n1").label("app", "db"),
            on("web-0", "n2").label("app", "web"),
            on("cache", "n3").pod_anti_affinity(&[("app", "web")], HOST),
        ],
    );
    insta::assert_yaml_snapshot!(r);
}

#[test]
fn snapshot_score() {
    let h = harness(None, &[]);
    let r = run(
        &h,
        PodBuilder::new("web")
            .label("app", "web")
            .preferred_pod_affinity(10, &[("app", "db")], ZONE)
            .preferred_pod_anti_affinity(5, &[("app", "web")], HOST),
        vec![
            node("n1", "a"),
            node("n2", "a"),
            node("n3", "b"),
            node("n4", "c"),
        ],
        vec![
            on("db", "n1").label("app", "db"),
            on("web-0", "n2").label("app", "web"),
            on("cache", "n4").pod_affinity(&[("app", "web")], ZONE),
        ],
    );
    insta::assert_yaml_snapshot!(r);
}

/// PreFilter and PreScore keep per-node counts from one cycle to the next. Under a long
/// run of random changes (pods with and without terms coming and going, nodes
/// relabelled, added, removed and reordered) and incoming pods of several shapes, one
/// long-lived plugin must answer exactly as a plugin built fresh for each cycle.
#[test]
fn kept_counts_answer_as_a_fresh_plugin_would() {
    let namespaces: &[NamespaceSpec<'_>] = &[("default", &[("team", "a")]), ("other", &[])];
    let args = Some(serde_json::json!({"hardPodAffinityWeight": 3}));
    let kept = harness(args.clone(), namespaces);
    let mut churn = Churn::new(11, &["z1", "z2", "z3"]);
    let mut nodes: Vec<Arc<NodeInfo>> = (0..24).map(|_| churn.node()).collect();
    let mut make_pod = |c: &mut Churn, node: &str| {
        let name = c.name("pod");
        let p = PodBuilder::new(&name).node(node);
        match c.below(8) {
            0 => p.label("app", "db"),
            1 => p.label("app", "web"),
            2 => p.label("app", "db").namespace("other"),
            3 => p
                .label("app", "cache")
                .pod_anti_affinity(&[("app", "web")], HOST),
            4 => p.label("app", "db").pod_affinity(&[("app", "web")], ZONE),
            5 => p.preferred_pod_affinity(5, &[("app", "web")], ZONE),
            6 => p.preferred_pod_anti_affinity(2, &[("app", "web")], HOST),
            _ => p,
        }
    };
    let incoming = [
        PodBuilder::new("w")
            .label("app", "web")
            .pod_affinity(&[("app", "db")], ZONE),
        PodBuilder::new("w")
            .label("app", "web")
            .pod_anti_affinity(&[("app", "db")], HOST),
        PodBuilder::new("w").label("app", "web"),
        PodBuilder::new("w")
            .label("app", "web")
            .preferred_pod_affinity(4, &[("app", "db")], ZONE)
            .preferred_pod_anti_affinity(1, &[("app", "cache")], HOST),
        PodBuilder::new("w").namespace("other").label("app", "web"),
    ]
    .map(PodBuilder::info);
    for step in 0..400 {
        churn.step(&mut nodes, &mut make_pod);
        let pod = &incoming[churn.below(incoming.len())];
        let fresh = harness(args.clone(), namespaces);
        assert_eq!(
            kept.run_as_is(pod, &nodes),
            fresh.run_as_is(pod, &nodes),
            "step {step}"
        );
    }
}

// ---------------------------------------------------------------- Remedies (explain)

#[test]
fn remedies_name_the_term_and_domain_in_the_way() {
    let h = harness(None, &[("default", &[])]);
    let nodes = vec![node("n-a", "a"), node("n-b", "b"), node("bare", "")];
    let existing = [
        on("db", "n-a").label("app", "db"),
        on("cache", "n-b").label("app", "cache"),
        on("loner", "n-b")
            .label("app", "loner")
            .pod_anti_affinity(&[("app", "web")], ZONE),
    ];
    let pods: Vec<Arc<PodInfo>> = existing.into_iter().map(PodBuilder::info).collect();
    let web = PodBuilder::new("web")
        .label("app", "web")
        .pod_affinity(&[("app", "db")], ZONE)
        .pod_anti_affinity(&[("app", "cache")], ZONE);
    let got = h.remedies(&web.info(), &node_infos(nodes, &pods));
    assert_eq!(
        got,
        vec![
            (
                "n-b".to_string(),
                vec![
                    format!("no pod matching the required pod affinity runs in {ZONE}=b"),
                    format!("1 pod(s) matching the required pod anti-affinity run in {ZONE}=b"),
                    format!("an existing pod's required anti-affinity forbids {ZONE}=b"),
                ]
            ),
            (
                "bare".to_string(),
                vec![format!("node has no {ZONE} label")]
            ),
        ]
    );
}

/// The hint fixes of v1.36 and v1.37; each case is answered Skip by v1.34's hint.
#[test]
fn pod_hint_fixes_since_v1_34() {
    let plugin = InterPodAffinity::new(&InterPodAffinityArgs::default(), &Handle::default())
        .expect("plugin");
    let hint = hint_of(&plugin.events_to_register(), EventResource::AssignedPod);
    use QueueingHint::Queue;
    // Two anti-affinity terms: a pod matching one of them repels (#139161).
    let wary = PodBuilder::new("p")
        .uid("p")
        .pod_anti_affinity(&[("app", "web")], ZONE)
        .pod_anti_affinity(&[("tier", "front")], ZONE)
        .info();
    let web = EventObject::Pod(on("a", "n1").label("app", "web").info());
    let plain = EventObject::Pod(on("a", "n1").label("app", "api").info());
    assert_eq!(
        hint(&wary, Some(&web), None),
        Ok(Queue),
        "deleted, one term"
    );
    assert_eq!(
        hint(&wary, Some(&web), Some(&plain)),
        Ok(Queue),
        "relabelled away from one term"
    );
    // An existing pod whose own anti-affinity repelled the pending pod is deleted (#135325).
    let pending = PodBuilder::new("q").uid("q").label("app", "db").info();
    let hater = EventObject::Pod(
        on("h", "n1")
            .pod_anti_affinity(&[("app", "db")], ZONE)
            .info(),
    );
    assert_eq!(
        hint(&pending, Some(&hater), None),
        Ok(Queue),
        "its hater left"
    );
    // The pending pod's own labels change (#135394).
    let before = EventObject::Pod(PodBuilder::new("q").uid("q").label("app", "db").info());
    let after = EventObject::Pod(PodBuilder::new("q").uid("q").label("app", "cache").info());
    assert_eq!(
        hint(&pending, Some(&before), Some(&after)),
        Ok(Queue),
        "relabelled itself"
    );
    // Another pending pod's relabelling still changes nothing.
    let other = PodBuilder::new("r").uid("r").info();
    assert_eq!(
        hint(&other, Some(&before), Some(&after)),
        Ok(QueueingHint::Skip)
    );
}

#[test]
fn node_hint_looks_at_the_topology_keys_only() {
    let plugin = InterPodAffinity::new(&InterPodAffinityArgs::default(), &Handle::default())
        .expect("plugin");
    let hint = hint_of(&plugin.events_to_register(), EventResource::Node);
    use QueueingHint::{Queue, Skip};
    let affine = PodBuilder::new("p")
        .pod_affinity(&[("app", "db")], ZONE)
        .info();
    let wary = PodBuilder::new("w")
        .pod_anti_affinity(&[("app", "web")], ZONE)
        .info();
    let n = |zone: &str, extra: &str| {
        let b = node("n", zone);
        EventObject::Node(
            if extra.is_empty() {
                b
            } else {
                b.label("x", extra)
            }
            .model(),
        )
    };
    let cases = [
        (
            "another label changed",
            &affine,
            n("a", ""),
            n("a", "y"),
            Skip,
        ),
        (
            "moved to another zone",
            &affine,
            n("a", ""),
            n("b", ""),
            Queue,
        ),
        ("gained the zone", &affine, n("", ""), n("a", ""), Queue),
        (
            "lost the zone (affinity)",
            &affine,
            n("a", ""),
            n("", ""),
            Skip,
        ),
        (
            "lost the zone (anti-affinity)",
            &wary,
            n("a", ""),
            n("", ""),
            Queue,
        ),
        (
            "another label (anti-affinity)",
            &wary,
            n("a", ""),
            n("a", "y"),
            Skip,
        ),
    ];
    for (name, pod, old, new, want) in cases {
        assert_eq!(hint(pod, Some(&old), Some(&new)), Ok(want), "{name}");
    }
}
