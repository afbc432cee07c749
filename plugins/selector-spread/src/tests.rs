//! Table tests for PreScore, Score and NormalizeScore, the group selector, and a snapshot.

use std::sync::Arc;

use kubesched_framework::model::PodInfo;
use kubesched_framework::model::k8s_openapi::api::apps::v1 as apps;
use kubesched_framework::model::k8s_openapi::api::core::v1 as api;
use kubesched_framework::model::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ObjectMeta, Time,
};
use kubesched_framework::model::k8s_openapi::jiff::Timestamp;
use kubesched_framework::{CycleState, Handle, ObjectStore};
use kubesched_testing::{NodeBuilder, PluginHarness, PluginRun, PodBuilder, node_infos, selector};

use super::*;

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(ns.into()),
        ..Default::default()
    }
}

fn service(store: &ObjectStore, name: &str, sel: &[(&str, &str)]) {
    store.services.upsert(api::Service {
        metadata: meta("default", name),
        spec: Some(api::ServiceSpec {
            selector: Some(
                sel.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    });
}

fn harness_with(setup: impl FnOnce(&ObjectStore)) -> PluginHarness {
    let store = ObjectStore::default();
    setup(&store);
    let handle = Handle::builder().objects(Arc::new(store));
    PluginHarness::from_registry(NAME, None, handle).expect("plugin is registered")
}

fn web_service(store: &ObjectStore) {
    service(store, "web", &[("app", "web")]);
}

fn node(name: &str, zone: &str) -> NodeBuilder {
    let n = NodeBuilder::new(name);
    if zone.is_empty() { n } else { n.zone(zone) }
}

fn web(name: &str, node: &str) -> PodBuilder {
    PodBuilder::new(name).node(node).label("app", "web")
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

struct Case<'a> {
    name: &'a str,
    setup: fn(&ObjectStore),
    pod: PodBuilder,
    nodes: Vec<NodeBuilder>,
    existing: Vec<PodBuilder>,
    /// None: PreScore skips.
    want: Option<(Vec<i64>, Vec<i64>)>,
}

#[test]
fn score_table() {
    let web_pod = || PodBuilder::new("p").label("app", "web");
    let cases = vec![
        Case {
            name: "nothing selects the pod: every node is as good",
            setup: |_| {},
            pod: web_pod(),
            nodes: vec![node("n1", ""), node("n2", "")],
            existing: vec![web("w1", "n1")],
            want: Some((vec![0, 0], vec![100, 100])),
        },
        Case {
            name: "pods of the same Service spread over nodes",
            setup: web_service,
            pod: web_pod(),
            nodes: vec![node("n1", ""), node("n2", ""), node("n3", "")],
            existing: vec![web("w1", "n1"), web("w2", "n1"), web("w3", "n2")],
            want: Some((vec![2, 1, 0], vec![0, 50, 100])),
        },
        Case {
            name: "other namespaces, other labels and terminating pods do not count",
            setup: web_service,
            pod: web_pod(),
            nodes: vec![node("n1", ""), node("n2", "")],
            existing: vec![
                web("w1", "n1").namespace("other"),
                PodBuilder::new("db").node("n1").label("app", "db"),
                web("w2", "n1").with(|p| {
                    p.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
                }),
                web("w3", "n2"),
            ],
            want: Some((vec![0, 1], vec![100, 0])),
        },
        Case {
            name: "the Service and the ReplicaSet must both select a pod",
            setup: |store| {
                web_service(store);
                store.replica_sets.upsert(apps::ReplicaSet {
                    metadata: meta("default", "rs"),
                    spec: apps::ReplicaSetSpec {
                        selector: selector(&[("track", "stable")]),
                        ..Default::default()
                    },
                    ..Default::default()
                });
            },
            pod: web_pod().label("track", "stable").owner("ReplicaSet", "rs"),
            nodes: vec![node("n1", ""), node("n2", "")],
            existing: vec![
                web("canary", "n1"),
                web("stable", "n2").label("track", "stable"),
            ],
            want: Some((vec![0, 1], vec![100, 0])),
        },
        Case {
            name: "zones weigh two thirds",
            setup: web_service,
            pod: web_pod(),
            nodes: vec![node("n1", "a"), node("n2", "a"), node("n3", "b")],
            existing: vec![web("w1", "n1"), web("w2", "n1"), web("w3", "n3")],
            want: Some((vec![2, 0, 1], vec![0, 33, 50])),
        },
        Case {
            name: "a node without a zone keeps its node score beside zoned nodes",
            setup: web_service,
            pod: web_pod(),
            nodes: vec![node("n1", "a"), node("n2", "b"), node("n3", "")],
            existing: vec![web("w1", "n1"), web("w2", "n3")],
            want: Some((vec![1, 0, 1], vec![0, 100, 0])),
        },
        Case {
            name: "a region label alone, or the beta labels, form a zone",
            setup: web_service,
            pod: web_pod(),
            nodes: vec![
                NodeBuilder::new("n1").label("topology.kubernetes.io/region", "r1"),
                NodeBuilder::new("n2").label("failure-domain.beta.kubernetes.io/zone", "z"),
            ],
            existing: vec![web("w1", "n1")],
            want: Some((vec![1, 0], vec![0, 100])),
        },
        Case {
            name: "a pod with topology spread constraints is left to PodTopologySpread",
            setup: web_service,
            pod: web_pod().spread_constraint(
                1,
                "topology.kubernetes.io/zone",
                "ScheduleAnyway",
                &[("app", "web")],
            ),
            nodes: vec![node("n1", "a")],
            existing: vec![web("w1", "n1")],
            want: None,
        },
    ];
    for case in cases {
        let h = harness_with(case.setup);
        let r = run(&h, case.pod, case.nodes, case.existing);
        let pre_score = r.pre_score.as_ref().map(|s| s.code.as_str());
        match case.want {
            None => assert_eq!(pre_score, Some("Skip"), "{}", case.name),
            Some((raw, normalized)) => {
                assert_eq!(pre_score, Some("Success"), "{}", case.name);
                let got_raw: Vec<i64> = r.nodes.iter().filter_map(|n| n.score).collect();
                let got_norm: Vec<i64> =
                    r.nodes.iter().filter_map(|n| n.normalized_score).collect();
                assert_eq!(got_raw, raw, "{} (raw)", case.name);
                assert_eq!(got_norm, normalized, "{} (normalized)", case.name);
            }
        }
    }
}

#[test]
fn score_without_pre_score_is_an_error() {
    let h = harness_with(|_| {});
    let nodes = h.set_nodes(&node_infos(vec![node("n1", "a")], &[]));
    let pod = PodBuilder::new("p").info();
    let score = h.plugin().as_score().expect("score");
    assert!(score.score(&CycleState::new(), &pod, &nodes[0]).is_err());
}

#[test]
fn group_selector_merges_services_and_the_controller() {
    let store = ObjectStore::default();
    service(&store, "by-app", &[("app", "web")]);
    service(&store, "not-ours", &[("app", "db")]);
    store.services.upsert(api::Service {
        metadata: meta("default", "headless"),
        spec: Some(api::ServiceSpec::default()),
        ..Default::default()
    });
    store.stateful_sets.upsert(apps::StatefulSet {
        metadata: meta("default", "ss"),
        spec: apps::StatefulSetSpec {
            selector: selector(&[("shard", "1")]),
            ..Default::default()
        },
        ..Default::default()
    });
    store
        .replication_controllers
        .upsert(api::ReplicationController {
            metadata: meta("default", "rc"),
            spec: Some(api::ReplicationControllerSpec {
                selector: Some(
                    [("rc".to_string(), "yes".to_string())]
                        .into_iter()
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        });
    let labels = [("app", "web"), ("shard", "1"), ("rc", "yes")];
    let keys = |pod: PodBuilder| -> Vec<String> {
        selector::default_selector(&pod.info(), &store)
            .requirements
            .iter()
            .map(|r| r.key.clone())
            .collect()
    };
    assert_eq!(keys(PodBuilder::new("p").labels(&labels)), ["app"]);
    assert_eq!(
        keys(
            PodBuilder::new("p")
                .labels(&labels)
                .owner("StatefulSet", "ss")
        ),
        ["app", "shard"]
    );
    let rc_owned = PodBuilder::new("p")
        .labels(&labels)
        .owner("ReplicationController", "rc")
        .with(|p| {
            for o in p.metadata.owner_references.iter_mut().flatten() {
                o.api_version = "v1".into();
            }
        });
    assert_eq!(keys(rc_owned), ["app", "rc"]);
    // apps/v1 is not where ReplicationControllers live: no match.
    assert_eq!(
        keys(
            PodBuilder::new("p")
                .labels(&labels)
                .owner("ReplicationController", "rc")
        ),
        ["app"]
    );
    assert!(keys(PodBuilder::new("p").label("app", "other")).is_empty());
}

#[test]
fn registered_at_score_points_only() {
    let desc = kubesched_framework::registry::find(NAME).expect("registered");
    let points: Vec<&str> = desc.extension_points().iter().map(|p| p.as_str()).collect();
    assert_eq!(points, ["PreScore", "Score"]);
    assert!((desc.args.decode)(None, &kubesched_framework::FeatureGates::defaults()).is_ok());
    assert!(
        (desc.args.decode)(
            Some(&serde_json::json!({"x": 1})),
            &kubesched_framework::FeatureGates::defaults()
        )
        .is_err()
    );
}

#[test]
fn snapshot() {
    let h = harness_with(web_service);
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
            web("w2", "n2"),
            web("w3", "n2"),
            web("w4", "n4"),
        ],
    );
    insta::assert_yaml_snapshot!(r);
}
