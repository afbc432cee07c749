//! Scenarios on the in-memory cluster with the default profile and every in-tree plugin.

use kubesched_sim::PodState;
use kubesched_tests::{simulate_text, simulate_workload};

const THREE_NODES: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}, status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n3, labels: {kubernetes.io/hostname: n3}}, spec: {taints: [{key: dedicated, value: db, effect: NoSchedule}]}, status: {allocatable: {cpu: '8', memory: 4Gi, pods: '10'}}}
";

fn pod(name: &str, cpu: &str, extra_spec: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  containers:\n  - {{name: c, image: app, resources: {{requests: {{cpu: '{cpu}'}}}}}}\n{extra_spec}"
    )
}

fn message_of(report: &kubesched_sim::SimReport, name: &str) -> String {
    report
        .pods
        .iter()
        .find(|p| p.name == name)
        .and_then(|p| p.message.clone())
        .unwrap_or_default()
}

#[test]
fn failed_scheduling_message_counts_reasons_over_nodes() {
    let input = format!("{THREE_NODES}{}", pod("big", "4", ""));
    let report = simulate_text(&input, None, 1, None);
    let p = &report.pods[0];
    assert_eq!(p.status, PodState::Unschedulable);
    let msg = message_of(&report, "big");
    assert!(
        msg.starts_with(
            "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu."
        ),
        "{msg}"
    );
}

#[test]
fn pre_filter_narrowing_marks_the_other_nodes() {
    let pinned = "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        nodeSelectorTerms:\n        - matchFields: [{key: metadata.name, operator: In, values: [n2]}]\n";
    let input = format!(
        "{THREE_NODES}{}{}",
        pod("fits", "1", pinned),
        pod("too-big", "3", pinned)
    );
    let report = simulate_text(&input, None, 1, None);
    let fits = report.pods.iter().find(|p| p.name == "fits").expect("pod");
    assert_eq!(fits.node.as_deref(), Some("n2"));
    let msg = message_of(&report, "too-big");
    assert!(
        msg.starts_with(
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]."
        ),
        "{msg}"
    );
}

#[test]
fn seeded_runs_are_identical() {
    let mut input = String::from(THREE_NODES);
    for i in 0..20 {
        input.push_str(&pod(&format!("p{i}"), "100m", ""));
    }
    let a = simulate_text(&input, None, 7, None);
    let b = simulate_text(&input, None, 7, None);
    let placements = |r: &kubesched_sim::SimReport| {
        r.pods
            .iter()
            .map(|p| (p.name.clone(), p.node.clone(), p.message.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(placements(&a), placements(&b));
    assert_eq!(a.summary.scheduled, 20);
}

#[test]
fn a_pod_becomes_schedulable_when_a_node_is_added_later() {
    let workload = "
kind: Workload
name: NodeArrives
ops:
- createNodes: {count: 1, template: {metadata: {name: small}, status: {allocatable: {cpu: '1', memory: 1Gi, pods: '10'}}}}
- createPods: {count: 1, template: {metadata: {name: big}, spec: {containers: [{name: c, image: app, resources: {requests: {cpu: '4'}}}]}}}
- expect: {scheduled: 0, unschedulable: 1}
- createNodes: {count: 1, template: {metadata: {name: large}, status: {allocatable: {cpu: '8', memory: 8Gi, pods: '10'}}}}
- expect: {scheduled: 1, unschedulable: 0}
";
    let report = simulate_workload(workload, 1).expect("workload runs");
    assert_eq!(report.pods[0].node.as_deref(), Some("large-0"));
    assert!(report.pods[0].attempts >= 2);
}

#[test]
fn explain_lists_every_node_with_its_verdict_and_scores() {
    let input = format!("{THREE_NODES}{}", pod("small", "500m", ""));
    let report = simulate_text(&input, None, 1, Some("default/small"));
    let e = report.explanations.first().expect("an explanation");
    assert_eq!(e.nodes.len(), 3);
    let n3 = e.nodes.iter().find(|n| n.node == "n3").expect("n3");
    assert!(!n3.feasible);
    assert_eq!(n3.rejected_by.as_deref(), Some("TaintToleration"));
    let n1 = e.nodes.iter().find(|n| n.node == "n1").expect("n1");
    assert!(n1.feasible);
    assert!(n1.scores.iter().any(|s| s.plugin == "NodeResourcesFit"));
    let total: i64 = n1.scores.iter().map(|s| s.weighted).sum();
    assert_eq!(Some(total), n1.total_score);
}

#[test]
fn broken_input_is_reported_and_the_rest_runs() {
    let input = format!(
        "{THREE_NODES}{}{}---\napiVersion: v1\nkind: Widget\nmetadata: {{name: w}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{namespace: default}}\nspec: {{containers: []}}\n",
        pod("ok", "100m", ""),
        pod("broken", "lots", "")
    );
    let report = simulate_text(&input, None, 1, None);
    // The pod with a quantity kubesched cannot read still loads (as in a cluster, it never
    // drops out) and is refused with the field named; the nameless pod is left out.
    assert_eq!(report.pods.len(), 2, "the good pod and the broken one");
    let ok = report.pods.iter().find(|p| p.name == "ok").expect("ok");
    assert_eq!(ok.status, PodState::Scheduled);
    let broken = report
        .pods
        .iter()
        .find(|p| p.name == "broken")
        .expect("broken");
    assert_eq!(broken.status, PodState::Unschedulable);
    let message = broken.message.as_deref().unwrap_or("");
    assert!(
        message.contains("spec.containers[0].resources[cpu]"),
        "{message}"
    );
    let problems: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("Pod default/broken")
                && p.contains("spec.containers[0].resources[cpu]")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("unknown kind \"Widget\"")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("metadata.name")),
        "{problems:?}"
    );
}
