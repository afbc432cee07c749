//! Capacity what-ifs on examples/what-if (issue 19): `--add-nodes`, `--drain` and
//! `--scale-workload`. Each answer's table and JSON are snapshot-tested, checked against
//! docs/report.schema.json, and its key facts asserted.

use std::path::PathBuf;

use kubesched_sim::{
    PodState, ScaleTarget, Scenario, SimError, SimReport, WhatIf, add_nodes, drain, load_paths,
    scale_workload,
};
use serde_json::Value;
// Links every in-tree plugin into this test binary.
use kubesched_tests as _;

fn example_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/what-if")
        .join(rel)
}

/// The cluster as it runs.
fn scenario(explain: Option<&str>) -> Scenario {
    scenario_of(&["cluster"], explain)
}

/// The cluster with the batch jobs someone wants to start.
fn with_jobs(explain: Option<&str>) -> Scenario {
    scenario_of(&["cluster", "pending.yaml"], explain)
}

fn scenario_of(paths: &[&str], explain: Option<&str>) -> Scenario {
    let paths: Vec<PathBuf> = paths.iter().map(|p| example_path(p)).collect();
    let (manifests, problems) = load_paths(&paths);
    assert!(problems.is_empty(), "{problems:?}");
    Scenario {
        config: kubesched_config::default_config(),
        manifests,
        problems,
        seed: 0,
        explain: explain.map(str::to_string),
        file_hint: "examples/what-if/cluster".into(),
    }
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn template() -> Vec<k8s_openapi::api::core::v1::Node> {
    let (m, problems) = load_paths(&[example_path("new-node.yaml")]);
    assert!(problems.is_empty(), "{problems:?}");
    m.nodes
}

fn check_json(report: &SimReport) -> Value {
    let json: Value = serde_json::from_str(&report.to_json()).expect("JSON");
    let errors = kubesched_tests::schema::report_schema_errors(&json);
    assert!(errors.is_empty(), "{errors:#?}");
    json
}

macro_rules! snapshot_json {
    ($name:expr, $report:expr) => {
        insta::assert_json_snapshot!($name, $report, {
            ".summary.duration_seconds" => "[duration]",
            ".summary.pods_per_second" => "[rate]",
            ".summary.latency_ms_p50" => "[latency]",
            ".summary.latency_ms_p99" => "[latency]",
        })
    };
}

#[test]
fn add_nodes_finds_the_smallest_count() {
    let report = block_on(add_nodes(&with_jobs(None), &template(), 10)).expect("answer");
    let Some(WhatIf::AddNodes(answer)) = &report.what_if else {
        panic!("no add-nodes answer: {:?}", report.what_if);
    };
    // Three 2.5-CPU pods, one fits today: two more nodes, one for each of the others.
    assert_eq!(answer.nodes_to_add, Some(2));
    assert_eq!(answer.added_nodes, ["pool-b-1", "pool-b-2"]);
    assert!(answer.still_failing.is_empty());
    // One copy is not enough, and the search tried it.
    let one = answer
        .tried
        .iter()
        .find(|t| t.copies == 1)
        .expect("1 tried");
    assert_eq!(one.unschedulable, 1);
    assert_eq!(report.summary.unschedulable, 0);
    check_json(&report);
    insta::assert_snapshot!("add_nodes_table", report.to_table(false));
    snapshot_json!("add_nodes_json", &report);
}

#[test]
fn add_nodes_reports_what_still_fails_at_max() {
    let report = block_on(add_nodes(&with_jobs(None), &template(), 1)).expect("answer");
    let Some(WhatIf::AddNodes(answer)) = &report.what_if else {
        panic!("no add-nodes answer");
    };
    assert_eq!(answer.nodes_to_add, None);
    assert_eq!(answer.added_nodes, ["pool-b-1"]);
    assert_eq!(answer.still_failing.len(), 1, "{:?}", answer.still_failing);
    let failing = &answer.still_failing[0];
    assert_eq!(failing.status, PodState::Unschedulable);
    assert!(
        failing
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("0/4 nodes are available: ")),
        "{failing:?}"
    );
    check_json(&report);
    insta::assert_snapshot!("add_nodes_not_enough_table", report.to_table(false));
}

#[test]
fn add_nodes_is_deterministic_and_explains() {
    let first =
        block_on(add_nodes(&with_jobs(Some("batch/etl-3")), &template(), 10)).expect("answer");
    let second =
        block_on(add_nodes(&with_jobs(Some("batch/etl-3")), &template(), 10)).expect("answer");
    assert_eq!(first.to_table(false), second.to_table(false));
    assert!(!first.explanations.is_empty(), "no explanation of etl-3");
    assert!(
        first.explanations[0]
            .nodes
            .iter()
            .any(|n| n.node.starts_with("pool-b-")),
        "the explanation does not see the added nodes"
    );
}

#[test]
fn add_nodes_refuses_a_copy_name_that_exists() {
    let mut nodes = template();
    nodes[0].metadata.name = Some("node".into());
    let err = block_on(add_nodes(&with_jobs(None), &nodes, 3)).expect_err("node-1 exists");
    assert!(matches!(err, SimError::WhatIf(_)));
    assert!(err.to_string().contains("node node-1"), "{err}");
}

#[test]
fn drain_moves_owned_pods_and_reports_budgets() {
    let report = block_on(drain(&scenario(None), &["node-1".to_string()])).expect("answer");
    let Some(WhatIf::Drain(answer)) = &report.what_if else {
        panic!("no drain answer");
    };
    let evicted: Vec<&str> = answer.evicted.iter().map(|e| e.pod.as_str()).collect();
    assert_eq!(evicted, ["shop/db-0", "shop/web-6c9f-k2x8p"]);
    for e in &answer.evicted {
        assert_ne!(e.outcome.to.as_deref(), Some("node-1"), "{e:?}");
    }
    let skipped: Vec<(&str, &str)> = answer
        .not_evicted
        .iter()
        .map(|s| (s.pod.as_str(), s.reason.split(':').next().unwrap_or("")))
        .collect();
    assert_eq!(
        skipped,
        [
            ("monitoring/node-exporter-5hx2c", "DaemonSet pod"),
            ("shop/debug", "no controller"),
        ]
    );
    assert_eq!(answer.budgets.len(), 1);
    let budget = &answer.budgets[0];
    assert_eq!(budget.budget, "shop/web");
    assert_eq!(budget.disruptions_allowed, 1);
    assert_eq!(budget.source, "status");
    assert_eq!(budget.pods, ["shop/web-6c9f-k2x8p"]);
    check_json(&report);
    insta::assert_snapshot!("drain_table", report.to_table(false));
    snapshot_json!("drain_json", &report);
}

#[test]
fn drain_budget_without_status_is_computed_from_its_spec() {
    let mut s = scenario(None);
    for (kind, doc) in &mut s.manifests.others {
        if kind == "PodDisruptionBudget" {
            doc.as_object_mut().expect("object").remove("status");
        }
    }
    let report = block_on(drain(&s, &["node-1".into(), "node-2".into()])).expect("answer");
    let Some(WhatIf::Drain(answer)) = &report.what_if else {
        panic!("no drain answer");
    };
    let budget = &answer.budgets[0];
    // Three healthy web pods, two must stay: one eviction allowed, two asked for.
    assert_eq!((budget.disruptions_allowed, budget.source), (1, "spec"));
    assert_eq!(budget.pods.len(), 2);
    assert!(budget.verdict.contains("at a time"), "{}", budget.verdict);
}

#[test]
fn drain_of_an_unknown_node_is_an_error() {
    let err = block_on(drain(&scenario(None), &["node-9".into()])).expect_err("no node-9");
    assert_eq!(err.to_string(), "--drain: no node node-9 in the input");
}

#[test]
fn scale_statefulset_gets_ordinals_and_claims() {
    let target: ScaleTarget = "statefulset/shop/db=3".parse().expect("target");
    let report = block_on(scale_workload(&scenario(Some("shop/db-2")), &target)).expect("answer");
    let Some(WhatIf::ScaleWorkload(answer)) = &report.what_if else {
        panic!("no scale answer");
    };
    assert_eq!(answer.current, 2);
    let added: Vec<&str> = answer.added.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(added, ["shop/db-2"]);
    assert_eq!(answer.claims, ["shop/data-db-2"]);
    assert_eq!(answer.added[0].status, PodState::Scheduled);
    assert_eq!(report.explanations.len(), 1);
    check_json(&report);
    insta::assert_snapshot!("scale_statefulset_table", report.to_table(false));
    snapshot_json!("scale_statefulset_json", &report);
}

#[test]
fn scale_deployment_adds_named_replicas() {
    let target: ScaleTarget = "deploy/shop/web=5".parse().expect("target");
    let report = block_on(scale_workload(&scenario(None), &target)).expect("answer");
    let Some(WhatIf::ScaleWorkload(answer)) = &report.what_if else {
        panic!("no scale answer");
    };
    assert_eq!((answer.kind.as_str(), answer.current), ("Deployment", 3));
    let added: Vec<&str> = answer.added.iter().map(|p| p.pod.as_str()).collect();
    assert_eq!(added, ["shop/web-whatif-1", "shop/web-whatif-2"]);
    check_json(&report);
    insta::assert_snapshot!("scale_deployment_table", report.to_table(false));
}

#[test]
fn scale_targets_parse_and_refuse() {
    let t: ScaleTarget = "ReplicaSet/shop/web-6c9f=4".parse().expect("target");
    assert_eq!(
        (t.kind, t.namespace.as_str(), t.name.as_str(), t.replicas),
        ("ReplicaSet", "shop", "web-6c9f", 4)
    );
    for bad in [
        "deploy/web=3",
        "job/shop/x=1",
        "deploy/shop/web",
        "deploy/shop/web=x",
    ] {
        assert!(bad.parse::<ScaleTarget>().is_err(), "{bad}");
    }
    let fewer: ScaleTarget = "deploy/shop/web=2".parse().expect("target");
    let err = block_on(scale_workload(&scenario(None), &fewer)).expect_err("fewer");
    assert!(err.to_string().contains("it has 3 pod(s) already"), "{err}");
    let missing: ScaleTarget = "sts/shop/nope=2".parse().expect("target");
    let err = block_on(scale_workload(&scenario(None), &missing)).expect_err("missing");
    assert_eq!(
        err.to_string(),
        "--scale-workload: no StatefulSet shop/nope (with a spec) in the input"
    );
}

#[test]
fn consolidate_removes_the_emptiest_nodes_that_can_go_and_says_why_the_rest_stay() {
    let report = block_on(kubesched_sim::consolidate(&scenario(None))).expect("answer");
    let Some(WhatIf::Consolidate(answer)) = &report.what_if else {
        panic!("no consolidate answer");
    };
    assert_eq!(answer.nodes, 3);
    assert_eq!(answer.tried.len(), 3, "every node is tried once");
    for t in &answer.tried {
        assert_eq!(t.removable, t.reason.is_none(), "{t:?}");
        assert_eq!(answer.removable.contains(&t.node), t.removable, "{t:?}");
    }
    // node-1 holds a pod no controller recreates: kubectl drain refuses it, so it stays.
    let node_1 = answer
        .tried
        .iter()
        .find(|t| t.node == "node-1")
        .expect("tried");
    assert!(
        node_1
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("shop/debug has no controller")),
        "{node_1:?}"
    );
    assert!(answer.removable.len() < answer.nodes, "the last node stays");
    // Whatever it calls removable, draining all of it together works.
    if !answer.removable.is_empty() {
        let drained = block_on(drain(&scenario(None), &answer.removable)).expect("drain");
        let Some(WhatIf::Drain(d)) = &drained.what_if else {
            panic!("no drain answer");
        };
        assert!(d.all_rescheduled, "{d:?}");
    }
    check_json(&report);
    // Deterministic: the same answer twice.
    let again = block_on(kubesched_sim::consolidate(&scenario(None))).expect("answer");
    assert_eq!(again.what_if, report.what_if);
    insta::assert_snapshot!("consolidate_table", report.to_table(false));
}
