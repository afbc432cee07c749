//! Preemption made visible in `simulate` (issue 21), on examples/preemption: two
//! high-priority training pods evict low-priority pods while a PodDisruptionBudget protects
//! the web tier, and a pod that names no class gets the global default's `Never`.
//! The report, the table and the explanation are snapshot-tested; the JSON is checked
//! against docs/report.schema.json.

use std::path::PathBuf;

use kubesched_sim::{Manifests, PodState, SimReport, load_paths};
use serde_json::Value;
// Links every in-tree plugin into this test binary.
use kubesched_tests as _;

fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/preemption")
}

fn simulate(manifests: Manifests, explain: Option<&str>) -> SimReport {
    kubesched_tests::with_simulation(
        &kubesched_config::default_config(),
        0,
        explain,
        async |mut sim| {
            sim.load(manifests, "examples/preemption");
            sim.settle().await;
            sim.report()
        },
    )
}

fn example(explain: Option<&str>) -> SimReport {
    let (manifests, problems) = load_paths(&[example_dir()]);
    assert!(problems.is_empty(), "{problems:?}");
    simulate(manifests, explain)
}

fn pod<'a>(report: &'a SimReport, key: &str) -> &'a kubesched_sim::PodResult {
    report
        .pods
        .iter()
        .find(|p| format!("{}/{}", p.namespace, p.name) == key)
        .unwrap_or_else(|| panic!("{key} is not in the report"))
}

#[test]
fn preemption_example_table() {
    insta::assert_snapshot!(example(None).to_table(false));
}

#[test]
fn preemption_example_json() {
    insta::assert_json_snapshot!(example(None), {
        ".summary.duration_seconds" => "[duration]",
        ".summary.pods_per_second" => "[rate]",
        ".summary.latency_ms_p50" => "[latency]",
        ".summary.latency_ms_p99" => "[latency]",
    });
}

#[test]
fn preemption_example_explain() {
    let report = example(Some("ml/train-1"));
    insta::assert_yaml_snapshot!(report.explanations);
    let table = report.to_table(false);
    let from = table.find("Explanation for").expect("an explanation");
    let to = table.find("\nSummary").expect("a summary");
    insta::assert_snapshot!("preemption_example_explain_table", &table[from..to]);
}

#[test]
fn preemptor_shows_nomination_victims_and_every_attempt() {
    let report = example(None);
    let train1 = pod(&report, "ml/train-1");
    assert_eq!(train1.status, PodState::Scheduled);
    assert_eq!(train1.node.as_deref(), Some("node-2"));
    assert_eq!(train1.nominated_node.as_deref(), Some("node-2"));
    assert_eq!(train1.victims, ["batch/nightly-1"]);
    assert_eq!(train1.history.len(), 2);
    let first = &train1.history[0];
    assert_eq!(first.nominated_node.as_deref(), Some("node-2"));
    assert!(
        first
            .message
            .starts_with("0/3 nodes are available: 3 Insufficient cpu."),
        "{}",
        first.message
    );
    assert_eq!(train1.history[1].node.as_deref(), Some("node-2"));

    // The second one cannot take node-2 (train-1 is nominated there) and must not touch
    // the web pod the budget protects: it evicts the cache instead.
    let train2 = pod(&report, "ml/train-2");
    assert_eq!(train2.victims, ["shop/cache-0"]);
    assert_eq!(train2.node.as_deref(), Some("node-3"));

    let nightly = pod(&report, "batch/nightly-1");
    assert_eq!(nightly.status, PodState::Preempted);
    assert_eq!(nightly.node.as_deref(), Some("node-2"));
    assert_eq!(nightly.preempted_by.as_deref(), Some("ml/train-1"));
    assert!(
        report.pods.iter().all(|p| p.name != "web-a"),
        "web-a was evicted"
    );
    assert_eq!(report.summary.preempted, 2);

    let preempted: Vec<(&str, Option<&str>)> = report
        .events
        .iter()
        .filter(|e| e.reason == "Preempted")
        .map(|e| {
            (
                e.regarding.name.as_str(),
                e.related.as_ref().map(|r| r.name.as_str()),
            )
        })
        .collect();
    assert_eq!(
        preempted,
        [("nightly-1", Some("train-1")), ("cache-0", Some("train-2"))]
    );
}

#[test]
fn a_victim_within_its_grace_period_is_terminating() {
    let (manifests, _) = load_paths(&[example_dir()]);
    let report = kubesched_tests::with_simulation(
        &kubesched_config::default_config(),
        0,
        None,
        async |mut sim| {
            sim.load(manifests, "examples/preemption");
            // Less than the victims' 30 s grace period.
            sim.advance_clock(std::time::Duration::from_secs(5)).await;
            sim.report()
        },
    );
    let nightly = pod(&report, "batch/nightly-1");
    assert_eq!(nightly.status, PodState::Terminating);
    assert_eq!(nightly.preempted_by.as_deref(), Some("ml/train-1"));
    let train1 = pod(&report, "ml/train-1");
    assert_eq!(train1.status, PodState::Unschedulable);
    assert_eq!(train1.nominated_node.as_deref(), Some("node-2"));
    assert_eq!(train1.victims, ["batch/nightly-1"]);
    assert!(
        report
            .to_table(false)
            .contains("batch/nightly-1  node-2  ml/train-1")
    );
}

#[test]
fn global_default_never_is_copied_to_pods_without_a_class() {
    let report = example(None);
    let weekly = pod(&report, "shop/weekly-report");
    assert_eq!(weekly.status, PodState::Unschedulable);
    let message = weekly.message.as_deref().unwrap_or_default();
    assert!(
        message.ends_with("preemption: not eligible due to preemptionPolicy=Never."),
        "{message}"
    );
    assert!(weekly.victims.is_empty());

    // The same pod carrying PreemptLowerPriority itself keeps it, and preempts.
    let (mut manifests, _) = load_paths(&[example_dir()]);
    for p in &mut manifests.pods {
        if p.metadata.name.as_deref() == Some("weekly-report") {
            p.modify(|p| {
                p.spec
                    .get_or_insert_with(Default::default)
                    .preemption_policy = Some("PreemptLowerPriority".into());
            });
        }
    }
    let report = simulate(manifests, None);
    let weekly = pod(&report, "shop/weekly-report");
    assert!(!weekly.victims.is_empty(), "{weekly:?}");
}

#[test]
fn missing_priority_class_is_an_input_problem() {
    let (mut manifests, _) = load_paths(&[example_dir()]);
    for p in &mut manifests.pods {
        if p.metadata.name.as_deref() == Some("train-2") {
            p.modify(|p| {
                p.spec
                    .get_or_insert_with(Default::default)
                    .priority_class_name = Some("no-such-class".into());
            });
        }
    }
    let report = simulate(manifests, None);
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let problem = &report.problems[0];
    assert_eq!(problem.object.as_deref(), Some("Pod ml/train-2"));
    assert_eq!(problem.field.as_deref(), Some("spec.priorityClassName"));
    assert_eq!(
        problem.message,
        "no PriorityClass with name no-such-class was found"
    );
    // The rest was simulated.
    assert!(report.pods.iter().all(|p| p.name != "train-2"));
    assert_eq!(pod(&report, "ml/train-1").status, PodState::Scheduled);
}

fn schema_errors(report: &Value) -> Vec<String> {
    kubesched_tests::schema::report_schema_errors(report)
}

#[test]
fn reports_follow_the_schema() {
    for explain in [None, Some("ml/train-1"), Some("shop/weekly-report")] {
        let report: Value = serde_json::from_str(&example(explain).to_json()).expect("JSON");
        let errors = schema_errors(&report);
        assert!(errors.is_empty(), "{explain:?}: {errors:#?}");
    }
}

#[test]
fn the_schema_check_catches_a_missing_or_mistyped_field() {
    let mut report: Value = serde_json::from_str(&example(None).to_json()).expect("JSON");
    report["pods"][0]
        .as_object_mut()
        .expect("a pod")
        .remove("history");
    report["pods"][1]["nominated_node"] = Value::from(3);
    report["events"][0]["type"] = Value::from("Fatal");
    let errors = schema_errors(&report);
    assert_eq!(
        errors,
        [
            "$.events[0].type: \"Fatal\" is not one of [String(\"Normal\"), String(\"Warning\")]",
            "$.pods[0]: missing history",
            "$.pods[1].nominated_node: expected [\"string\", \"null\"], got 3",
        ],
    );
}
