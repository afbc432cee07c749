//! GenericWorkload's gang scheduling on the in-memory cluster (upstream v1.37's
//! workload-aware scheduling with GangScheduling): a gang that fits is placed whole in one
//! pod-group cycle; a gang that cannot reach its minCount holds no node, each member
//! carrying upstream's PlacementFeasible or FailedScheduling words; a gang short of members
//! waits at PreEnqueue; with the gate off the same pods are scheduled one by one.

use kubesched_config::{FeatureGates, default_config_with_gates};
use kubesched_framework::model::PodInfo;
use kubesched_framework::workload::{
    PlacementCycleState, PlacementFeasiblePlugin, PlacementProgress, PodGroupInfo,
};
use kubesched_framework::{Handle, PluginError, PreEnqueuePlugin, Status};
use kubesched_sim::{PodState, SimReport};
use kubesched_tests::{manifests_of, with_simulation};

/// A PlacementFeasible plugin that fails with an error for the PodGroup named `broken`
/// (and admits every pod at PreEnqueue, so a profile can enable it).
struct BrokenPlacement;

impl BrokenPlacement {
    fn new(_: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

impl PreEnqueuePlugin for BrokenPlacement {
    fn pre_enqueue(&self, _: &PodInfo) -> Status {
        Status::success()
    }
}

impl PlacementFeasiblePlugin for BrokenPlacement {
    fn placement_feasible(
        &self,
        _: &mut PlacementCycleState,
        group: &PodGroupInfo,
        _: PlacementProgress,
    ) -> Status {
        if group.name == "broken" {
            Status::error("the placement oracle is down")
        } else {
            Status::success()
        }
    }
}

kubesched_framework::register_plugin! {
    name: "BrokenPlacement",
    plugin: BrokenPlacement,
    factory: BrokenPlacement::new,
}

/// Three nodes of 4 CPUs in three zones.
const NODES: &str = "
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1, topology.kubernetes.io/zone: a}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2, topology.kubernetes.io/zone: b}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
- {apiVersion: v1, kind: Node, metadata: {name: n3, labels: {kubernetes.io/hostname: n3, topology.kubernetes.io/zone: c}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}
";

fn pod_group(name: &str, min_count: u32) -> String {
    format!(
        "---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: ml}}
spec:
  schedulingPolicy: {{gang: {{minCount: {min_count}}}}}
"
    )
}

/// `n` members of 3 CPUs each: one per node at most.
fn members(group: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---
apiVersion: v1
kind: Pod
metadata: {{name: {group}-{i}, namespace: ml}}
spec:
  schedulingGroup: {{podGroupName: {group}}}
  containers: [{{name: c, image: trainer, resources: {{requests: {{cpu: '3'}}}}}}]
"
            )
        })
        .collect()
}

fn simulate(input: &str, gate_on: bool) -> SimReport {
    let gates = if gate_on {
        FeatureGates::parse(["GenericWorkload=true"]).expect("gates")
    } else {
        FeatureGates::defaults()
    };
    let loaded = default_config_with_gates(&gates);
    with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(manifests_of(input), "input.yaml");
        sim.settle().await;
        sim.report()
    })
}

fn outcome(report: &SimReport, name: &str) -> (PodState, Option<String>, String) {
    let p = report
        .pods
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name} reported"));
    (
        p.status,
        p.node.clone(),
        p.message.clone().unwrap_or_default(),
    )
}

#[test]
fn a_gang_that_fits_is_placed_whole() {
    let input = format!("{NODES}{}{}", pod_group("train", 3), members("train", 3));
    let report = simulate(&input, true);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let mut nodes: Vec<String> = (0..3)
        .map(|i| {
            let (state, node, message) = outcome(&report, &format!("train-{i}"));
            assert_eq!(state, PodState::Scheduled, "train-{i}: {message}");
            node.expect("bound")
        })
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2", "n3"]);
}

#[test]
fn a_gang_that_cannot_reach_min_count_holds_nothing() {
    // Four 3-CPU members, three nodes: three fit, the fourth fits nowhere.
    let input = format!("{NODES}{}{}", pod_group("big", 4), members("big", 4));
    let report = simulate(&input, true);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let mut own = 0;
    for i in 0..4 {
        let (state, node, message) = outcome(&report, &format!("big-{i}"));
        assert_eq!(state, PodState::Unschedulable, "big-{i}");
        assert_eq!(node, None, "big-{i} holds no node");
        if message == "0/3 nodes are available: 3 Insufficient cpu." {
            own += 1;
        } else {
            assert_eq!(
                message, "minCount (4) cannot be satisfied: 3 scheduled, 0 remaining",
                "big-{i}"
            );
        }
    }
    assert_eq!(own, 1, "one member fit nowhere: {:?}", report.pods);
    // The nodes stay free: a pod that needs one whole node still fits on each.
    let later = format!(
        "{input}---
apiVersion: v1
kind: Pod
metadata: {{name: solo, namespace: ml}}
spec:
  containers: [{{name: c, image: app, resources: {{requests: {{cpu: '4'}}}}}}]
"
    );
    let report = simulate(&later, true);
    assert_eq!(outcome(&report, "solo").0, PodState::Scheduled);
}

#[test]
fn a_gang_short_of_members_waits_at_pre_enqueue() {
    let input = format!("{NODES}{}{}", pod_group("few", 3), members("few", 2));
    let report = simulate(&input, true);
    for i in 0..2 {
        let (state, node, message) = outcome(&report, &format!("few-{i}"));
        assert_ne!(state, PodState::Scheduled, "few-{i}");
        assert_eq!(node, None);
        assert_eq!(
            message, "waiting for minCount pods from a gang to appear in scheduling queue",
            "few-{i}"
        );
    }
    // Without its PodGroup a member waits for the group to appear.
    let report = simulate(&format!("{NODES}{}", members("lost", 1)), true);
    assert_eq!(
        outcome(&report, "lost-0").2,
        r#"waiting for pods's pod group "lost" to appear in scheduling queue"#
    );
}

#[test]
fn with_the_gate_off_members_are_ordinary_pods() {
    let input = format!("{NODES}{}{}", pod_group("big", 4), members("big", 4));
    let report = simulate(&input, false);
    let scheduled = (0..4)
        .filter(|i| outcome(&report, &format!("big-{i}")).0 == PodState::Scheduled)
        .count();
    assert_eq!(scheduled, 3, "{:?}", report.pods);
}

/// examples/gang-workload with the gate on, as `kubesched simulate examples/gang-workload
/// --feature-gates GenericWorkload=true --explain ml/tune-6` prints it.
fn gang_workload_example(explain: Option<&str>) -> SimReport {
    let dir =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/gang-workload");
    let (manifests, problems) = kubesched_sim::load_paths(&[dir]);
    assert!(problems.is_empty(), "{problems:?}");
    let (file, text) = manifests.config.clone().expect("the example has a config");
    let gates = FeatureGates::parse(["GenericWorkload=true"]).expect("gates");
    let loaded =
        kubesched_config::load_str_with_gates(&text, &file, &gates).expect("valid example config");
    with_simulation(&loaded, 0, explain, async |mut sim| {
        sim.load(manifests, "gang-workload");
        sim.settle().await;
        sim.report()
    })
}

#[test]
fn gang_workload_example_table() {
    let report = gang_workload_example(Some("ml/tune-6"));
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let groups: Vec<(&str, bool, usize)> = report
        .pod_groups
        .iter()
        .map(|g| (g.name.as_str(), g.placed, g.scheduled))
        .collect();
    assert_eq!(
        groups,
        [("eval", true, 2), ("train", true, 6), ("tune", false, 0)]
    );
    insta::assert_snapshot!(report.to_table(false));
}

#[test]
fn gang_workload_example_json() {
    let report = gang_workload_example(None);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).expect("JSON");
    let errors = kubesched_tests::schema::report_schema_errors(&json);
    assert!(
        errors.is_empty(),
        "the report follows docs/report.schema.json: {errors:#?}"
    );
    insta::assert_json_snapshot!(report.pod_groups);
}

#[test]
fn a_gang_that_did_not_fit_is_placed_whole_once_a_node_is_added() {
    // Four 3-CPU members on three nodes: the group fails whole; a fourth node is added and
    // the member that fit nowhere wakes, taking its siblings with it into one new cycle.
    let input = format!("{NODES}{}{}", pod_group("big", 4), members("big", 4));
    let gates = FeatureGates::parse(["GenericWorkload=true"]).expect("gates");
    let loaded = default_config_with_gates(&gates);
    let report = with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(manifests_of(&input), "input.yaml");
        sim.settle().await;
        let before = sim.report();
        assert!(
            before.pods.iter().all(|p| p.node.is_none()),
            "{:?}",
            before.pods
        );
        let node = manifests_of(
            "{apiVersion: v1, kind: Node, metadata: {name: n4, labels: {kubernetes.io/hostname: n4, topology.kubernetes.io/zone: d}}, status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}}",
        );
        sim.load(node, "later.yaml");
        // Past the members' backoff.
        sim.advance_clock(std::time::Duration::from_secs(11)).await;
        sim.settle().await;
        sim.report()
    });
    for i in 0..4 {
        assert_eq!(
            outcome(&report, &format!("big-{i}")).0,
            PodState::Scheduled,
            "big-{i}: {:?}",
            report.pods
        );
    }
    let group = &report.pod_groups[0];
    assert!(group.placed && group.scheduled == 4, "{group:?}");
}

#[test]
fn gang_members_wait_at_permit_until_min_count_is_scheduled() {
    // v1.37's GangScheduling keeps Permit beside PlacementFeasible: of a gang of three
    // placed in one cycle, the first two wait at Permit and the third lets them go.
    let input = format!("{NODES}{}{}", pod_group("train", 3), members("train", 3));
    let gates = FeatureGates::parse(["GenericWorkload=true"]).expect("gates");
    let loaded = default_config_with_gates(&gates);
    let (report, metrics) = with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(manifests_of(&input), "input.yaml");
        sim.settle().await;
        (sim.report(), sim.scheduler().metrics().encode())
    });
    for i in 0..3 {
        assert_eq!(
            outcome(&report, &format!("train-{i}")).0,
            PodState::Scheduled
        );
    }
    let waits: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("scheduler_permit_wait_duration_seconds_count"))
        .collect();
    assert_eq!(
        waits,
        [r#"scheduler_permit_wait_duration_seconds_count{result="Success"} 2"#],
        "{metrics}"
    );
}

/// The value of one series in the scheduler's metrics text.
fn series(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

fn metrics_after(input: &str, gate_on: bool) -> String {
    let gates = if gate_on {
        FeatureGates::parse(["GenericWorkload=true"]).expect("gates")
    } else {
        FeatureGates::defaults()
    };
    let loaded = default_config_with_gates(&gates);
    with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(manifests_of(input), "input.yaml");
        sim.settle().await;
        sim.scheduler().metrics().encode()
    })
}

#[test]
fn pod_group_cycles_are_counted_in_upstreams_metrics() {
    // A gang that fits (train: 2 of 3 CPUs on two nodes) and one that cannot reach its
    // minCount (big: four 3-CPU members, one node left).
    let input = format!(
        "{NODES}{}{}{}{}",
        pod_group("train", 2),
        members("train", 2),
        pod_group("big", 4),
        members("big", 4)
    );
    let metrics = metrics_after(&input, true);
    let attempts = |result: &str| {
        series(
            &metrics,
            &format!(
                r#"scheduler_podgroup_schedule_attempts_total{{result="{result}",profile="default-scheduler"}}"#
            ),
        )
    };
    assert_eq!(attempts("scheduled"), Some(1.0), "{metrics}");
    assert!(
        attempts("unschedulable").is_some_and(|n| n >= 1.0),
        "{metrics}"
    );
    assert_eq!(attempts("error"), None, "{metrics}");
    let cycles = attempts("scheduled").unwrap_or(0.0) + attempts("unschedulable").unwrap_or(0.0);
    assert_eq!(
        series(
            &metrics,
            "scheduler_podgroup_scheduling_algorithm_duration_seconds_count"
        ),
        Some(cycles),
        "one algorithm run per cycle: {metrics}"
    );
    assert!(metrics.contains(
        "# HELP scheduler_podgroup_scheduling_attempt_duration_seconds [ALPHA] Pod group scheduling attempt latency in seconds\n"
    ));
    // With the gate off the families do not exist.
    let off = metrics_after(&input, false);
    assert!(!off.contains("scheduler_podgroup_"), "{off}");
}

#[test]
fn a_gang_whose_members_disagree_on_priority_is_refused_whole() {
    // One member of three carries a priority the PodGroup (priority 0) does not have: v1.37
    // refuses the whole group before trying any member.
    let odd = members("mixed", 3).replacen(
        "spec:\n  schedulingGroup: {podGroupName: mixed}\n",
        "spec:\n  priority: 1000\n  schedulingGroup: {podGroupName: mixed}\n",
        1,
    );
    assert!(odd.contains("priority: 1000"));
    let report = simulate(&format!("{NODES}{}{odd}", pod_group("mixed", 3)), true);
    for i in 0..3 {
        let (state, node, message) = outcome(&report, &format!("mixed-{i}"));
        assert_ne!(state, PodState::Scheduled, "mixed-{i}");
        assert_eq!(node, None, "mixed-{i}");
        assert!(
            message.contains(
                "all pods in a single pod group should have the same priority as the pod group's priority, got 1000 and 0"
            ),
            "mixed-{i}: {message}"
        );
    }
    // The same members with one priority are placed.
    let report = simulate(
        &format!("{NODES}{}{}", pod_group("mixed", 3), members("mixed", 3)),
        true,
    );
    assert_eq!(outcome(&report, "mixed-0").0, PodState::Scheduled);
}

#[test]
fn a_placement_feasible_error_fails_the_group_with_upstreams_words() {
    let config = "
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: BrokenPlacement
";
    let gates = FeatureGates::parse(["GenericWorkload=true"]).expect("gates");
    let loaded =
        kubesched_config::load_str_with_gates(config, "config.yaml", &gates).expect("config");
    let input = format!(
        "{NODES}{}{}{}{}",
        pod_group("broken", 2),
        members("broken", 2),
        pod_group("fine", 2),
        members("fine", 2)
    );
    let report = with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(manifests_of(&input), "input.yaml");
        sim.settle().await;
        sim.report()
    });
    for i in 0..2 {
        let (state, node, message) = outcome(&report, &format!("broken-{i}"));
        assert_eq!(state, PodState::Error, "broken-{i}: {message}");
        assert_eq!(node, None, "broken-{i}");
        assert!(
            message.contains(
                r#"failed to evaluate placement feasibility: running PlacementFeasible plugin "BrokenPlacement": the placement oracle is down"#
            ),
            "broken-{i}: {message}"
        );
        assert_eq!(
            outcome(&report, &format!("fine-{i}")).0,
            PodState::Scheduled,
            "fine-{i}"
        );
    }
}

/// examples/gang-workload with the gate off: the example's own config keeps GangScheduling
/// (Permit, five minutes) in the profile, so its tune pods time out at Permit at the same
/// instant. Their rejections, and so the report's events, come in the same order every run
/// (they followed a hash map's order, which differs from one run to the next).
#[test]
fn permit_timeouts_at_one_instant_are_reported_in_the_same_order_every_run() {
    let run = || {
        let dir =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/gang-workload");
        let (manifests, problems) = kubesched_sim::load_paths(&[dir]);
        assert!(problems.is_empty(), "{problems:?}");
        let (file, text) = manifests.config.clone().expect("the example has a config");
        let loaded = kubesched_config::load_str(&text, &file).expect("valid example config");
        with_simulation(&loaded, 0, None, async |mut sim| {
            sim.load(manifests, "gang-workload");
            sim.settle().await;
            let report = sim.report();
            serde_json::to_string(&(&report.pods, &report.events)).expect("JSON")
        })
    };
    let first = run();
    assert!(first.contains("timeout after waiting 5m0s"));
    for i in 0..4 {
        assert!(run() == first, "run {} differs from the first", i + 2);
    }
}
