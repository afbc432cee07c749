//! Preemption made visible in `simulate` (issue 21), on examples/preemption: two
//! high-priority training pods evict low-priority pods while a PodDisruptionBudget protects
//! the web tier, and a pod that names no class gets the global default's `Never`.
//! The report, the table and the explanation are snapshot-tested; the JSON is checked
//! against docs/report.schema.json.

use std::path::PathBuf;

use kubesched_sim::{Manifests, PodState, SimReport, Simulation, SimulationOptions, load_paths};
use serde_json::Value;
// Links every in-tree plugin into this test binary.
use kubesched_tests as _;

fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/preemption")
}

fn simulate(manifests: Manifests, explain: Option<&str>) -> SimReport {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let mut sim = Simulation::new(
            &kubesched_config::default_config(),
            SimulationOptions {
                seed: Some(0),
                explain: explain.map(str::to_string),
                progress: None,
            },
        )
        .expect("simulation");
        sim.load(manifests, "examples/preemption");
        sim.settle().await;
        sim.report()
    })
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let report = runtime.block_on(async {
        let mut sim = Simulation::new(
            &kubesched_config::default_config(),
            SimulationOptions {
                seed: Some(0),
                explain: None,
                progress: None,
            },
        )
        .expect("simulation");
        sim.load(manifests, "examples/preemption");
        // Less than the victims' 30 s grace period.
        sim.advance_clock(std::time::Duration::from_secs(5)).await;
        sim.report()
    });
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
            p.spec
                .get_or_insert_with(Default::default)
                .preemption_policy = Some("PreemptLowerPriority".into());
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
            p.spec
                .get_or_insert_with(Default::default)
                .priority_class_name = Some("no-such-class".into());
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

// ---- docs/report.schema.json, checked by a small validator of the keywords it uses ----

fn schema() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/report.schema.json");
    let text = std::fs::read_to_string(&path).expect("docs/report.schema.json");
    serde_json::from_str(&text).expect("the schema is JSON")
}

fn type_matches(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        other => panic!("the schema uses type {other:?}, which this validator does not know"),
    }
}

/// Every way `value` breaks `schema`, as `path: what`.
fn validate(root: &Value, schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference
            .strip_prefix("#/$defs/")
            .expect("local references only");
        validate(root, &root["$defs"][name], value, path, errors);
        return;
    }
    if let Some(ty) = schema.get("type") {
        let types: Vec<&str> = match ty {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => panic!("bad type in schema at {path}"),
        };
        if !types.iter().any(|t| type_matches(value, t)) {
            errors.push(format!("{path}: expected {types:?}, got {value}"));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        errors.push(format!("{path}: {value} is not one of {options:?}"));
    }
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = options
            .iter()
            .filter(|s| {
                let mut e = Vec::new();
                validate(root, s, value, path, &mut e);
                e.is_empty()
            })
            .count();
        if matching != 1 {
            errors.push(format!("{path}: {value} matches {matching} of oneOf"));
        }
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_i64)
        && value.as_i64().is_some_and(|v| v < min)
    {
        errors.push(format!("{path}: {value} is below {min}"));
    }
    if let Some(object) = value.as_object() {
        for field in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !object.contains_key(field) {
                errors.push(format!("{path}: missing {field}"));
            }
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (field, sub) in properties {
                if let Some(v) = object.get(field) {
                    validate(root, sub, v, &format!("{path}.{field}"), errors);
                }
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (i, v) in array.iter().enumerate() {
            validate(root, items, v, &format!("{path}[{i}]"), errors);
        }
    }
}

fn schema_errors(report: &Value) -> Vec<String> {
    let schema = schema();
    let mut errors = Vec::new();
    validate(&schema, &schema, report, "$", &mut errors);
    errors
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
