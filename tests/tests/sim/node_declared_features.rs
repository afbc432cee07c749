//! NodeDeclaredFeatures end to end on the in-memory cluster: a pod that needs a declared
//! feature lands only on the node declaring it, the FailedScheduling message is upstream
//! v1.37's, and `--emulated-version 1.34` (no such plugin by default) places it anywhere.

use kubesched_config::{FeatureGates, default_config_with_gates};
use kubesched_framework::Version;
use kubesched_sim::{Manifests, PodState, SimReport};
use kubesched_tests::{simulate_text, with_simulation};

/// An old kubelet (declares nothing) and a new one declaring the restart-all feature. The
/// old node has more room, so without the plugin it would win on resource scores.
const NODES: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: old, labels: {kubernetes.io/hostname: old}}, status: {allocatable: {cpu: '16', memory: 32Gi, pods: '110'}}}
- apiVersion: v1
  kind: Node
  metadata: {name: new, labels: {kubernetes.io/hostname: new}}
  status:
    allocatable: {cpu: '2', memory: 4Gi, pods: '110'}
    declaredFeatures: [RestartAllContainersOnContainerExits]
";

/// A pod whose container restarts the whole pod when it exits with 42.
fn restart_all_pod(name: &str) -> String {
    format!(
        "---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  containers:
  - name: c
    image: app
    resources: {{requests: {{cpu: 100m}}}}
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {{operator: In, values: [42]}}
"
    )
}

fn placement(report: &SimReport, name: &str) -> (PodState, Option<String>, String) {
    let p = report
        .pods
        .iter()
        .find(|p| p.name == name)
        .expect("pod in the report");
    (
        p.status,
        p.node.clone(),
        p.message.clone().unwrap_or_default(),
    )
}

#[test]
fn a_pod_needing_a_feature_lands_on_the_node_declaring_it() {
    let input = format!("{NODES}{}", restart_all_pod("needs-restart-all"));
    let report = simulate_text(&input, None, 1, Some("default/needs-restart-all"));
    let (state, node, _) = placement(&report, "needs-restart-all");
    assert_eq!(state, PodState::Scheduled);
    assert_eq!(node.as_deref(), Some("new"));
    let e = report.explanations.first().expect("an explanation");
    let old = e.nodes.iter().find(|n| n.node == "old").expect("old");
    assert!(!old.feasible);
    assert_eq!(old.rejected_by.as_deref(), Some("NodeDeclaredFeatures"));
}

#[test]
fn no_node_declaring_the_feature_gives_upstreams_message() {
    let only_old = NODES
        .split("- apiVersion: v1\n  kind: Node\n  metadata: {name: new")
        .next()
        .expect("the old node");
    let input = format!("{only_old}{}", restart_all_pod("stuck"));
    let report = simulate_text(&input, None, 1, None);
    let (state, _, msg) = placement(&report, "stuck");
    assert_eq!(state, PodState::Unschedulable);
    // UnschedulableAndUnresolvable: preemption is not even tried on that node. The default
    // profile's PostFilter plugins speak in order (DynamicResources, then DefaultPreemption).
    assert_eq!(
        msg,
        "0/1 nodes are available: 1 node(s) didn't match Pod's required features. \
         no new claims to deallocate, \
         preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    );
}

#[test]
fn emulating_v1_34_leaves_the_plugin_out() {
    let gates = FeatureGates::parse_at(Version::V1_34, std::iter::empty::<&str>()).expect("gates");
    let loaded = default_config_with_gates(&gates);
    let input = format!("{NODES}{}", restart_all_pod("anywhere"));
    let report = with_simulation(&loaded, 1, None, async |mut sim| {
        let mut m = Manifests::default();
        let mut problems = Vec::new();
        kubesched_sim::load_text(&input, "input.yaml", &mut m, &mut problems);
        sim.load(m, "input.yaml");
        sim.settle().await;
        sim.report()
    });
    let (state, node, _) = placement(&report, "anywhere");
    assert_eq!(state, PodState::Scheduled);
    // Without the plugin the roomier old node scores higher.
    assert_eq!(node.as_deref(), Some("old"));
}
