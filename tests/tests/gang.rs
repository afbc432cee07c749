//! Gang scheduling with Coscheduling (an opt-in plugin, linked into this test binary only):
//! examples/gang end to end in simulate. The gang of 8 fits only whole and is bound whole,
//! the later gang waits with the group's rejection, the incomplete one is held back at
//! PreEnqueue, and the PodGroups' status shows what the scheduler saw. A group that can be
//! placed only in part times out at Permit as a whole.

use std::path::PathBuf;

use std::sync::Arc;

use kubesched_plugin_coscheduling::{PodGroup, phase};
use kubesched_plugin_coscheduling::{REJECTED_IN_POST_FILTER, failed_recently, group_rejected};
use kubesched_sim::{Manifests, PodState, SimReport, Simulation, load_paths, load_text};
// Links every in-tree plugin, and Coscheduling, into this test binary.
use kubesched_plugin_coscheduling as _;
use kubesched_tests as _;

fn run_gang_example() -> (SimReport, Simulation) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/gang");
    let (manifests, problems) = load_paths(&[dir]);
    assert!(problems.is_empty(), "{problems:?}");
    simulate(manifests)
}

/// A configuration and a cluster, each read as its own file; neither may have problems.
fn config_and_cluster(config: &str, cluster: &str) -> Manifests {
    let (mut manifests, mut problems) = (Manifests::default(), Vec::new());
    load_text(config, "config.yaml", &mut manifests, &mut problems);
    load_text(cluster, "cluster.yaml", &mut manifests, &mut problems);
    assert!(problems.is_empty(), "{problems:?}");
    manifests
}

/// Simulates manifests (with their KubeSchedulerConfiguration) until nothing moves.
fn simulate(manifests: Manifests) -> (SimReport, Simulation) {
    let (file, text) = manifests
        .config
        .clone()
        .expect("the manifests have a config");
    let loaded = kubesched_config::load_str(&text, &file).expect("valid example config");
    kubesched_tests::with_simulation(&loaded, 0, None, async |mut sim| {
        sim.load(manifests, "gang");
        sim.settle().await;
        (sim.report(), sim)
    })
}

#[test]
fn a_gang_is_bound_whole_and_the_next_one_waits() {
    let (report, sim) = run_gang_example();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    insta::assert_snapshot!(report.to_table(false));
    let state = |name: &str| {
        report
            .pods
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} reported"))
            .status
    };
    for i in 0..8 {
        assert_eq!(
            state(&format!("train-{i}")),
            PodState::Scheduled,
            "train-{i}"
        );
    }
    for i in 0..4 {
        assert_ne!(state(&format!("eval-{i}")), PodState::Scheduled, "eval-{i}");
    }
    for i in 0..2 {
        assert_ne!(
            state(&format!("sweep-{i}")),
            PodState::Scheduled,
            "sweep-{i}"
        );
    }

    let groups = sim.cluster().objects().of::<PodGroup>();
    let status_of = |name: &str| {
        groups
            .get(Some("ml"), name)
            .and_then(|g| g.status.clone())
            .unwrap_or_default()
    };
    // The gang of 8 is bound whole: Scheduled, with every pod counted.
    let train = status_of("train");
    assert_eq!(train.phase.as_deref(), Some(phase::SCHEDULED));
    assert_eq!(train.scheduled, 8);
    assert!(train.schedule_start_time.is_some());
    // Nothing runs pods in a simulation: no pod counts, no Running phase.
    assert_eq!((train.running, train.succeeded, train.failed), (0, 0, 0));
    // The waiting gang was tried but nothing of it is bound.
    let eval = status_of("eval");
    assert_ne!(eval.phase.as_deref(), Some(phase::SCHEDULED));
    assert_eq!(eval.scheduled, 0);
    let sweep = status_of("sweep");
    assert_eq!(sweep.phase.as_deref(), Some(phase::PENDING));
    assert_eq!(sweep.scheduled, 0);
}

/// Two nodes of 4 CPUs and a group of three 3-CPU pods: only two fit. With
/// `podGroupRejectPercentage: 50` a gap of one pod in three is small enough for PostFilter
/// to let the group go on, so the two placed pods wait at Permit until the wait
/// (`permitWaitingTimeSeconds`, the group sets none) runs out, and go back to the queue
/// together (Unreserve rejects whichever sibling still waits). No pod of the group is ever
/// bound, however often it is tried.
const PERMIT_TIMEOUT_CONFIG: &str = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: Coscheduling}]
      disabled: [{name: PrioritySort}]
  pluginConfig:
  - name: Coscheduling
    args: {permitWaitingTimeSeconds: 10, podGroupRejectPercentage: 50}
"#;

const PERMIT_TIMEOUT_CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: half, namespace: default}
spec: {minMember: 3}
---
apiVersion: v1
kind: Pod
metadata: {name: half-0, namespace: default, labels: {scheduling.x-k8s.io/pod-group: half}}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "3"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: half-1, namespace: default, labels: {scheduling.x-k8s.io/pod-group: half}}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "3"}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: half-2, namespace: default, labels: {scheduling.x-k8s.io/pod-group: half}}
spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "3"}}}]}
"#;

#[test]
fn placed_pods_time_out_at_permit_together_when_the_group_cannot_be_completed() {
    let manifests = config_and_cluster(PERMIT_TIMEOUT_CONFIG, PERMIT_TIMEOUT_CLUSTER);
    let (report, _sim) = simulate(manifests);
    for pod in &report.pods {
        assert_ne!(pod.status, PodState::Scheduled, "{}", pod.name);
        assert_eq!(pod.node, None, "{}", pod.name);
    }
    assert!(report.events.iter().all(|e| e.reason != "Scheduled"));
    let notes_of = |pod: &str| -> Vec<&str> {
        report
            .events
            .iter()
            .filter(|e| e.reason == "FailedScheduling" && e.regarding.name == pod)
            .map(|e| e.note.as_str())
            .collect()
    };
    // A Permit rejection reads as upstream's one-node fit error.
    let timeout = "0/1 nodes are available: 1 rejected due to timeout after waiting 10s at plugin Coscheduling.";
    let placed: Vec<&str> = ["half-0", "half-1", "half-2"]
        .into_iter()
        .filter(|p| notes_of(p).contains(&timeout))
        .collect();
    // Two fit at each try (which two may change between tries) and time out together.
    assert!(placed.len() >= 2, "pods that timed out: {placed:?}");
    // The gap was within the percentage: PostFilter never gave the group up.
    for pod in ["half-0", "half-1", "half-2"] {
        let rejected = group_rejected("default/half", pod);
        assert!(
            notes_of(pod).iter().all(|n| !n.contains(&rejected)),
            "{pod}: {:#?}",
            notes_of(pod)
        );
    }
}

/// Two 4-CPU nodes; `big` (three 3-CPU pods, all needed) can never fit, `small` (two
/// 1-CPU pods) can.
const LIVELOCK_CLUSTER: &str = r#"
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {kubernetes.io/hostname: n1}}, status: {allocatable: {cpu: "4", memory: 32Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: {kubernetes.io/hostname: n2}}, status: {allocatable: {cpu: "4", memory: 32Gi, pods: "110"}}}
- {apiVersion: scheduling.x-k8s.io/v1alpha1, kind: PodGroup, metadata: {name: big, namespace: default, creationTimestamp: "2026-01-01T10:00:00Z"}, spec: {minMember: 3}}
- {apiVersion: scheduling.x-k8s.io/v1alpha1, kind: PodGroup, metadata: {name: small, namespace: default, creationTimestamp: "2026-01-01T10:01:00Z"}, spec: {minMember: 2}}
- {apiVersion: v1, kind: Pod, metadata: {name: big-0, namespace: default, labels: {scheduling.x-k8s.io/pod-group: big}}, spec: {containers: [{name: main, image: x, resources: {requests: {cpu: "3"}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: big-1, namespace: default, labels: {scheduling.x-k8s.io/pod-group: big}}, spec: {containers: [{name: main, image: x, resources: {requests: {cpu: "3"}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: big-2, namespace: default, labels: {scheduling.x-k8s.io/pod-group: big}}, spec: {containers: [{name: main, image: x, resources: {requests: {cpu: "3"}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: small-0, namespace: default, labels: {scheduling.x-k8s.io/pod-group: small}}, spec: {containers: [{name: main, image: x, resources: {requests: {cpu: "1"}}}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: small-1, namespace: default, labels: {scheduling.x-k8s.io/pod-group: small}}, spec: {containers: [{name: main, image: x, resources: {requests: {cpu: "1"}}}]}}
"#;

const LIVELOCK_CONFIG: &str = "
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
      disabled:
      - name: PrioritySort
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
";

/// Simulates manifests like [`simulate`], but gives up (panics) once the run has gone
/// through more than `max_cycles` scheduling cycles (counted from the simulation's progress
/// reports, one per 256 cycles): a live-lock fails the test instead of hanging it, with no
/// wall-clock timeout.
fn simulate_bounded(manifests: Manifests, max_cycles: usize) -> (SimReport, Simulation) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (file, text) = manifests
        .config
        .clone()
        .expect("the manifests have a config");
    let loaded = kubesched_config::load_str(&text, &file).expect("valid config");
    let reports = Arc::new(AtomicUsize::new(0));
    let counted = reports.clone();
    let progress = move |_: kubesched_sim::Progress| {
        let seen = counted.fetch_add(1, Ordering::SeqCst);
        // The run reports once more at its end.
        assert!(
            seen * 256 <= max_cycles,
            "more than {max_cycles} scheduling cycles: the run does not end"
        );
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let options = kubesched_sim::SimulationOptions {
            seed: Some(0),
            explain: None,
            progress: Some(Box::new(progress)),
        };
        let mut sim = Simulation::new(&loaded, options).expect("simulation");
        sim.load(manifests, "livelock");
        sim.settle().await;
        (sim.report(), sim)
    })
}

#[test]
fn a_gang_that_never_fits_does_not_retry_without_end() {
    let manifests = config_and_cluster(LIVELOCK_CONFIG, LIVELOCK_CLUSTER);
    // Before the fix the run never ended: the rejected gang was placed and rejected again
    // some 2,000 times a second on a clock that never moved.
    let (report, sim) = simulate_bounded(manifests, 2_000);
    let pod = |name: &str| {
        report
            .pods
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} reported"))
    };
    for name in ["small-0", "small-1"] {
        assert_eq!(pod(name).status, PodState::Scheduled, "{name}");
    }
    let notes_of = |pod: &str| -> Vec<&str> {
        report
            .events
            .iter()
            .filter(|e| e.reason == "FailedScheduling" && e.regarding.name == pod)
            .map(|e| e.note.as_str())
            .collect()
    };
    let big = ["big-0", "big-1", "big-2"];
    for name in big {
        let p = pod(name);
        assert_eq!(p.status, PodState::Unschedulable, "{name}");
        assert_eq!(p.node, None, "{name}");
        // One round for the group, and the retry the rejection itself causes.
        assert!(p.attempts <= 2, "{name}: {} attempts", p.attempts);
        // No pod of the given-up group was placed again and left holding its node
        // through a Permit wait for siblings that were not coming.
        assert!(
            notes_of(name)
                .iter()
                .all(|n| !n.contains("rejected due to timeout")),
            "{name}: {:#?}",
            notes_of(name)
        );
    }
    // The pod that did not fit says why; the denied retry says the group failed recently.
    let notes: Vec<&str> = big.iter().flat_map(|p| notes_of(p)).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("Insufficient cpu") && n.contains("gets rejected due to Pod")),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains(&failed_recently("default/big"))),
        "{notes:#?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.ends_with(&format!("1 {REJECTED_IN_POST_FILTER}."))),
        "{notes:#?}"
    );
    // Nothing waited on the virtual clock: no Permit wait ran out.
    assert!(
        sim.clock().elapsed() < std::time::Duration::from_secs(10),
        "{:?} of virtual time",
        sim.clock().elapsed()
    );
    // The report counts the gang as unschedulable, not pending without a word.
    assert_eq!(report.summary.unschedulable, 3, "{:?}", report.summary);
}
