//! TopologyAwareWorkloadScheduling on the in-memory cluster (upstream v1.37's placement
//! search, with GenericWorkload): a gang whose PodGroup names a topology key is placed
//! within one domain; when several domains could hold it, PodGroupPodsCount and
//! NodeResourcesFit's PlacementScore pick the fullest; when none can, every member carries
//! upstream's `0/N placements are available` words. With the gate off the same gang is
//! spread over the zones as before.

use kubesched_config::{FeatureGates, default_config_with_gates};
use kubesched_sim::{PodState, SimReport};
use kubesched_tests::{manifests_of, with_simulation};

const ZONE: &str = "topology.kubernetes.io/zone";

/// Zone `a`: two nodes of 4 CPUs; zone `b`: three nodes of 4 CPUs; zone `c`: one node of
/// 4 CPUs with 2 of them taken.
const NODES: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: a1, labels: {kubernetes.io/hostname: a1, topology.kubernetes.io/zone: a}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: a2, labels: {kubernetes.io/hostname: a2, topology.kubernetes.io/zone: a}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: b1, labels: {kubernetes.io/hostname: b1, topology.kubernetes.io/zone: b}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: b2, labels: {kubernetes.io/hostname: b2, topology.kubernetes.io/zone: b}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: b3, labels: {kubernetes.io/hostname: b3, topology.kubernetes.io/zone: b}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: c1, labels: {kubernetes.io/hostname: c1, topology.kubernetes.io/zone: c}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Pod, metadata: {name: busy, namespace: ml}, spec: {nodeName: c1, containers: [{name: c, image: app, resources: {requests: {cpu: '2'}}}]}, status: {phase: Running}}
";

fn pod_group(name: &str, min_count: u32, key: Option<&str>) -> String {
    let constraints = key.map_or(String::new(), |k| {
        format!("\n  schedulingConstraints: {{topology: [{{key: {k}}}]}}")
    });
    format!(
        "---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: ml}}
spec:
  schedulingPolicy: {{gang: {{minCount: {min_count}}}}}{constraints}
"
    )
}

/// `n` members asking for `cpu` CPUs each.
fn members(group: &str, n: usize, cpu: u32) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---
apiVersion: v1
kind: Pod
metadata: {{name: {group}-{i}, namespace: ml}}
spec:
  schedulingGroup: {{podGroupName: {group}}}
  containers: [{{name: c, image: trainer, resources: {{requests: {{cpu: '{cpu}'}}}}}}]
"
            )
        })
        .collect()
}

fn simulate(input: &str, topology_aware: bool) -> SimReport {
    let mut gates = vec!["GenericWorkload=true"];
    if topology_aware {
        gates.push("TopologyAwareWorkloadScheduling=true");
    }
    let gates = FeatureGates::parse(gates).expect("gates");
    let loaded = default_config_with_gates(&gates);
    with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(manifests_of(input), "input.yaml");
        sim.settle().await;
        sim.report()
    })
}

/// The zone of each member's node (None: not bound), and its message.
fn zones(report: &SimReport, group: &str, n: usize) -> Vec<(Option<char>, String)> {
    (0..n)
        .map(|i| {
            let name = format!("{group}-{i}");
            let p = report
                .pods
                .iter()
                .find(|p| p.name == name)
                .unwrap_or_else(|| panic!("{name} reported"));
            let zone = (p.status == PodState::Scheduled)
                .then(|| p.node.as_deref().and_then(|n| n.chars().next()))
                .flatten();
            (zone, p.message.clone().unwrap_or_default())
        })
        .collect()
}

#[test]
fn a_gang_is_placed_within_the_one_zone_that_holds_it() {
    // Three members of 3 CPUs: one per node; only zone b has three nodes.
    let input = format!(
        "{NODES}{}{}",
        pod_group("train", 3, Some(ZONE)),
        members("train", 3, 3)
    );
    let report = simulate(&input, true);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    for (zone, message) in zones(&report, "train", 3) {
        assert_eq!(zone, Some('b'), "{message}");
    }
    let group = &report.pod_groups[0];
    assert!(group.placed);
    assert_eq!(group.placement.as_deref(), Some("b"));
    insta::assert_json_snapshot!(report.pod_groups);
}

#[test]
fn of_several_zones_that_hold_it_the_fullest_wins() {
    // Two members of 1 CPU: zone a (8 CPUs), b (12) and c (2 free of 4) all hold them;
    // PodGroupPodsCount ties, NodeResourcesFit's MostAllocated prefers the fullest.
    let input = format!(
        "{NODES}{}{}",
        pod_group("small", 2, Some(ZONE)),
        members("small", 2, 1)
    );
    let report = simulate(&input, true);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    for (zone, message) in zones(&report, "small", 2) {
        assert_eq!(zone, Some('c'), "{message}");
    }
    let group = &report.pod_groups[0];
    let scores: Vec<(&str, bool, Option<i64>)> = group
        .placements
        .iter()
        .map(|p| (p.name.as_str(), p.feasible, p.score))
        .collect();
    // PodGroupPodsCount 100 for each; NodeResourcesFit's cpu part: a 2 of 8 → 25, b 2 of
    // 12 → 16, c 2 + 2 of 4 → 100 (memory: only the scoring defaults, averaged in).
    assert_eq!(scores.len(), 3, "{scores:?}");
    assert!(
        scores
            .iter()
            .all(|(_, feasible, s)| *feasible && s.is_some())
    );
    let best = scores.iter().max_by_key(|(_, _, s)| *s).expect("scored");
    assert_eq!(best.0, "c", "{scores:?}");
    assert_eq!(group.placement.as_deref(), Some("c"));
}

#[test]
fn a_gang_no_zone_can_hold_stays_pending_with_upstreams_words() {
    // Four members of 3 CPUs: no zone has four nodes.
    let input = format!(
        "{NODES}{}{}",
        pod_group("big", 4, Some(ZONE)),
        members("big", 4, 3)
    );
    let report = simulate(&input, true);
    let group = &report.pod_groups[0];
    assert!(!group.placed);
    // The first placement (zone a, two nodes) took two members; the third fit nowhere
    // there, so minCount could no longer be met.
    assert_eq!(
        group.message.as_deref(),
        Some(
            "0/3 placements are available, first placement status: minCount (4) cannot be satisfied: 2 scheduled, 1 remaining"
        )
    );
    for (zone, _) in zones(&report, "big", 4) {
        assert_eq!(zone, None);
    }
}

#[test]
fn with_the_gate_off_the_gang_is_spread_as_before() {
    let input = format!(
        "{NODES}{}{}",
        pod_group("train", 3, Some(ZONE)),
        members("train", 3, 3)
    );
    let report = simulate(&input, false);
    let placed = zones(&report, "train", 3);
    assert!(placed.iter().all(|(z, _)| z.is_some()), "{placed:?}");
    let distinct: std::collections::BTreeSet<char> =
        placed.iter().filter_map(|(z, _)| *z).collect();
    assert!(distinct.len() > 1, "placed across zones: {placed:?}");
    let group = &report.pod_groups[0];
    assert!(group.placed);
    assert_eq!(group.placement, None);
    assert!(group.placements.is_empty());
}

#[test]
fn without_a_topology_constraint_the_whole_cluster_is_one_placement() {
    let input = format!(
        "{NODES}{}{}",
        pod_group("train", 3, None),
        members("train", 3, 3)
    );
    let report = simulate(&input, true);
    let group = &report.pod_groups[0];
    assert!(group.placed, "{:?}", group.message);
    assert_eq!(group.placement.as_deref(), Some(""));
    assert_eq!(group.placements.len(), 1);
}
