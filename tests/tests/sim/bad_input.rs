//! Bad input never panics: property tests that mutate valid manifests, workloads,
//! configurations and watch events (bytes flipped, cut, inserted; JSON values swapped for
//! others of another type), and throw arbitrary text at the quantity and selector parsers.
//! Every error names its file (or object) and, where there is one, the field.
//!
//! CI runs 96 cases per property. For a longer run set `PROPTEST_CASES`, e.g.
//! `PROPTEST_CASES=20000 cargo test -p kubesched-tests --test sim bad_input`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use kubesched_live::lenient::Lenient;
use kubesched_model::{Quantity, selector::LabelSelector};
use proptest::prelude::*;
use serde_json::{Value, json};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(96);
    ProptestConfig {
        cases,
        // Failures are reported with their input; no files are written.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

const MANIFESTS: &str = r#"apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {zone: a, gen: "5"}
spec:
  taints: [{key: k, value: v, effect: NoSchedule}]
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, labels: {app: web}}
spec:
  nodeName: n1
  containers:
  - name: c
    image: nginx
    resources: {requests: {cpu: 500m, memory: 1Gi}}
    ports: [{containerPort: 80, hostPort: 8080}]
  tolerations: [{key: k, operator: Equal, value: v, effect: NoSchedule}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: gen, operator: Gt, values: ["3"]}]
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector: {matchExpressions: [{key: app, operator: In, values: [web]}]}
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
---
apiVersion: v1
kind: Pod
metadata: {name: pending, namespace: default}
spec:
  priority: 10
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
"#;

const WORKLOAD: &str = r#"kind: Workload
name: basic
description: Two zones, spread pods and a few that never fit.
ops:
- createNodes:
    count: 10
    zones: [zone-a, zone-b]
    template:
      metadata: {name: node, labels: {gen: "5"}}
      status:
        allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
- createPods:
    count: 20
    namespace: web
    measure: true
    template:
      metadata: {name: web, labels: {app: web}}
      spec:
        containers:
        - {name: c, image: app, resources: {requests: {cpu: 500m, memory: 1Gi}}}
        topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
- deletePods: {namespace: web, labels: {app: web}, count: 5}
- advanceClock: {seconds: 30}
- barrier: {}
"#;

const CONFIG: &str = r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 8
percentageOfNodesToScore: 50
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled: [{name: ImageLocality}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
"#;

/// A text edit: cut a range, insert bytes, or overwrite one.
#[derive(Debug, Clone)]
enum Edit {
    Cut(usize, usize),
    Insert(usize, String),
    Flip(usize, char),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Edit::Cut(a, n)),
        (any::<usize>(), "[-:{}\\[\\]\"', a-z0-9\\n#&*!|>]{0,12}")
            .prop_map(|(a, s)| Edit::Insert(a, s)),
        (any::<usize>(), any::<char>()).prop_map(|(a, c)| Edit::Flip(a, c)),
    ];
    prop::collection::vec(edit, 1..6)
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for e in edits {
        let len = chars.len().max(1);
        match e {
            Edit::Cut(at, n) => {
                let a = at % len;
                let b = (a + n).min(chars.len());
                if a < b {
                    chars.drain(a..b);
                }
            }
            Edit::Insert(at, s) => {
                let a = at % (chars.len() + 1);
                for (i, c) in s.chars().enumerate() {
                    chars.insert(a + i, c);
                }
            }
            Edit::Flip(at, c) => {
                if !chars.is_empty() {
                    let a = at % chars.len();
                    chars[a] = *c;
                }
            }
        }
    }
    chars.into_iter().collect()
}

/// Replaces the `pick`-th value of the tree (in walk order) with `with`.
fn swap_value(v: &mut Value, pick: &mut usize, with: &Value) -> bool {
    if *pick == 0 {
        *v = with.clone();
        return true;
    }
    *pick -= 1;
    match v {
        Value::Object(m) => m.values_mut().any(|c| swap_value(c, pick, with)),
        Value::Array(a) => a.iter_mut().any(|c| swap_value(c, pick, with)),
        _ => false,
    }
}

fn odd_values() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "\\PC{0,16}".prop_map(Value::String),
        Just(json!([])),
        Just(json!({})),
        Just(json!([{"key": "", "operator": "Gt", "values": ["x", "y"]}])),
        Just(json!({"matchExpressions": [{"key": "k", "operator": "Nope"}]})),
        Just(json!("-1e400m")),
    ]
}

fn problems_name_their_file(problems: &[kubesched_sim::InputProblem], file: &str) {
    for p in problems {
        assert_eq!(p.file, file, "{p:?}");
        assert!(!p.message.is_empty(), "{p:?}");
    }
}

/// Everything kubesched builds from loaded objects: no panic, whatever they hold.
fn compile_all(m: &kubesched_sim::Manifests) {
    for p in &m.pods {
        if let Ok(info) = kubesched_model::PodInfo::new(p.clone()) {
            for e in &info.problems {
                assert!(!e.field.is_empty(), "{e}");
            }
        }
    }
    for n in &m.nodes {
        let _ = kubesched_model::Node::new(Arc::new(n.clone()));
    }
}

/// The seeds themselves are valid, so a mutation is what breaks them.
#[test]
fn the_seeds_load_cleanly() {
    let mut m = kubesched_sim::Manifests::default();
    let mut problems = Vec::new();
    kubesched_sim::load_text(MANIFESTS, "cluster.yaml", &mut m, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!((m.nodes.len(), m.pods.len()), (1, 2));
    for p in &m.pods {
        let info = kubesched_model::PodInfo::new(p.clone()).expect("pod compiles");
        assert!(info.problems.is_empty(), "{:?}", info.problems);
    }
    kubesched_sim::Workload::from_str(WORKLOAD, "workload.yaml").expect("valid workload");
    kubesched_config::load_str(CONFIG, "scheduler.yaml").expect("valid configuration");
}

/// What an API server refuses never reaches the scheduler: a pod with a negative
/// overhead (which once surfaced as NodeResourcesFit's "invalid score" and about 85
/// retries) or a spread constraint with maxSkew 0 is reported with status Invalid and
/// the field, and everything else runs.
#[test]
fn pods_an_api_server_would_refuse_are_invalid_and_the_rest_runs() {
    let text = r#"apiVersion: v1
kind: Node
metadata: {name: n1, labels: {zone: a}}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: good}
spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: negative}
spec:
  overhead: {cpu: "-1"}
  containers: [{name: c, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: skew}
spec:
  containers: [{name: c}]
  topologySpreadConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]
"#;
    let report = kubesched_tests::simulate_text(text, None, 0, None);
    let row = |name: &str| {
        report
            .pods
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} in the report"))
    };
    assert_eq!(row("good").status, kubesched_sim::PodState::Scheduled);
    for (name, message) in [
        (
            "negative",
            r#"spec.overhead[cpu]: Invalid value: "-1": must be greater than or equal to 0"#,
        ),
        (
            "skew",
            "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
        ),
    ] {
        let p = row(name);
        assert_eq!(p.status, kubesched_sim::PodState::Invalid, "{name}");
        assert_eq!(p.message.as_deref(), Some(message));
        assert_eq!(p.attempts, 0);
    }
    assert_eq!(
        (
            report.summary.pods,
            report.summary.scheduled,
            report.summary.invalid
        ),
        (3, 1, 2)
    );
    assert_eq!(report.problems.len(), 2, "{:?}", report.problems);
    assert!(report.events.iter().all(|e| e.regarding.name == "good"));
    let table = report.to_table(false);
    assert!(table.contains("default/negative  Invalid"), "{table}");
    assert!(table.contains("2 invalid"), "{table}");
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_manifest_text_never_panics(e in edits()) {
        let text = apply(MANIFESTS, &e);
        let mut m = kubesched_sim::Manifests::default();
        let mut problems = Vec::new();
        kubesched_sim::load_text(&text, "cluster.yaml", &mut m, &mut problems);
        problems_name_their_file(&problems, "cluster.yaml");
        compile_all(&m);
    }

    #[test]
    fn manifests_with_swapped_values_load_or_name_the_field(pick in 0usize..200, with in odd_values()) {
        let mut docs: Vec<Value> = serde_saphyr::from_multiple(MANIFESTS).expect("valid seed");
        let mut left = pick;
        for d in docs.iter_mut() {
            if swap_value(d, &mut left, &with) {
                break;
            }
        }
        let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": docs}))
            .expect("json");
        let mut m = kubesched_sim::Manifests::default();
        let mut problems = Vec::new();
        kubesched_sim::load_text(&text, "list.json", &mut m, &mut problems);
        problems_name_their_file(&problems, "list.json");
        for p in &problems {
            // Something inside an object changed: the problem names the object and the field.
            prop_assert!(p.object.is_some(), "{p}");
            prop_assert!(p.field.as_ref().is_some_and(|f| !f.is_empty()), "{p}");
        }
        compile_all(&m);
    }

    #[test]
    fn mutated_workloads_never_panic(e in edits()) {
        let text = apply(WORKLOAD, &e);
        if let Err(err) = kubesched_sim::Workload::from_str(&text, "workload.yaml") {
            prop_assert!(err.to_string().starts_with("workload.yaml: "), "{err}");
        }
    }

    #[test]
    fn workloads_with_swapped_values_name_the_field(pick in 1usize..80, with in odd_values()) {
        let mut doc: Value = serde_saphyr::from_str(WORKLOAD).expect("valid seed");
        let mut left = pick;
        swap_value(&mut doc, &mut left, &with);
        let text = serde_json::to_string(&doc).expect("json");
        if let Err(err) = kubesched_sim::Workload::from_str(&text, "workload.yaml") {
            let shown = err.to_string();
            prop_assert!(shown.starts_with("workload.yaml: "), "{shown}");
            // Something inside the document changed: the error names where.
            let field = shown["workload.yaml: ".len()..].split(':').next().unwrap_or("");
            prop_assert!(!field.is_empty() && field != "." && field != "(document)", "{shown}");
        }
    }

    #[test]
    fn mutated_configurations_never_panic(e in edits()) {
        let text = apply(CONFIG, &e);
        if let Err(err) = kubesched_config::load_str(&text, "scheduler.yaml") {
            prop_assert!(err.to_string().contains("scheduler.yaml"), "{err}");
        }
    }

    #[test]
    fn configurations_with_swapped_values_name_the_file(pick in 0usize..60, with in odd_values()) {
        let mut doc: Value = serde_saphyr::from_str(CONFIG).expect("valid seed");
        let mut left = pick;
        swap_value(&mut doc, &mut left, &with);
        let text = serde_json::to_string(&doc).expect("json");
        if let Err(err) = kubesched_config::load_str(&text, "scheduler.yaml") {
            prop_assert!(err.to_string().contains("scheduler.yaml"), "{err}");
            // Only the whole document swapped for another value has no field to name.
            if pick > 0 {
                for p in err.problems() {
                    prop_assert!(!p.path.is_empty(), "{err}");
                }
            }
        }
    }

    #[test]
    fn any_quantity_text_parses_or_is_refused(text in "\\PC{0,24}") {
        let _ = Quantity::parse(&text);
    }

    #[test]
    fn quantities_in_the_grammar_parse_exactly(
        whole in 0u64..1_000_000,
        frac in prop::option::of(0u32..1000),
        suffix in prop::sample::select(vec!["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "n", "u", "e3", "E-2"]),
    ) {
        let text = match frac {
            Some(f) => format!("{whole}.{f}{suffix}"),
            None => format!("{whole}{suffix}"),
        };
        let q = Quantity::parse(&text);
        prop_assert!(q.is_ok(), "{text}: {q:?}");
        let q = q.expect("ok");
        prop_assert!(q.nanos() >= 0);
        // Whole units without a fraction or suffix read back exactly.
        if frac.is_none() && suffix.is_empty() {
            prop_assert_eq!(q.value(), whole as i64);
            prop_assert_eq!(q.milli_value(), whole as i64 * 1000);
        }
    }

    #[test]
    fn any_label_selector_compiles_or_names_the_field(
        key in "\\PC{0,8}",
        op in prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "", "in", "Nope"]),
        values in prop::collection::vec("\\PC{0,6}", 0..4),
    ) {
        let sel = k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_expressions: Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: key.clone(),
                operator: op.to_string(),
                values: Some(values.clone()),
            }]),
            ..Default::default()
        };
        let (compiled, problem) = LabelSelector::compile_lenient(Some(&sel), "spec.selector");
        if let Some(p) = problem {
            prop_assert_eq!(p.field, "spec.selector.matchExpressions[0]");
            prop_assert!(compiled.matches_nothing);
        }
        let term = k8s_openapi::api::core::v1::NodeSelectorTerm {
            match_expressions: Some(vec![k8s_openapi::api::core::v1::NodeSelectorRequirement {
                key,
                operator: op.to_string(),
                values: Some(values),
            }]),
            ..Default::default()
        };
        let (t, problem) = kubesched_model::NodeSelectorTerm::compile_lenient(&term, "t");
        if problem.is_some() {
            prop_assert!(!t.matches(&Default::default(), "n1"), "a bad term matches nothing");
        }
    }

    #[test]
    fn any_field_selector_text_parses_or_is_refused(text in "[a-z.=!,\\\\ ]{0,30}") {
        let _ = kubesched_tests::apiserver::selector::FieldSelector::parse("pods", &text);
    }

    #[test]
    fn watch_events_with_swapped_values_decode_or_name_the_field(pick in 0usize..120, with in odd_values()) {
        let docs: Vec<Value> = serde_saphyr::from_multiple(MANIFESTS).expect("valid seed");
        let mut pod = docs[1].clone();
        let mut left = pick;
        swap_value(&mut pod, &mut left, &with);
        // `type` first, as kube-apiserver writes the line.
        let line = format!(r#"{{"type":"MODIFIED","object":{pod}}}"#);
        // The event as kube-runtime's watcher decodes a line of the stream.
        match serde_json::from_str::<kube::core::WatchEvent<Lenient<Pod>>>(&line) {
            Ok(kube::core::WatchEvent::Modified(obj)) => {
                if let Err(m) = &obj.object {
                    prop_assert!(!m.message.is_empty());
                    prop_assert!(!m.field.is_empty(), "{m:?}");
                } else if let Ok(p) = &obj.object {
                    let _ = kubesched_model::PodInfo::new(Arc::new(p.clone()));
                }
            }
            Ok(_) => {}
            // The line itself is broken (the swap hit `type`): the watcher logs and
            // carries on; decoding never panics.
            Err(_) => {}
        }
        let node = docs[0].clone();
        let _ = serde_json::from_value::<Lenient<Node>>(node);
    }

    #[test]
    fn mutated_watch_lines_never_panic(e in edits()) {
        let docs: Vec<Value> = serde_saphyr::from_multiple(MANIFESTS).expect("valid seed");
        let line = format!(r#"{{"type":"ADDED","object":{}}}"#, docs[1]);
        let text = apply(&line, &e);
        let _ = serde_json::from_str::<kube::core::WatchEvent<Lenient<Pod>>>(&text);
    }
}
