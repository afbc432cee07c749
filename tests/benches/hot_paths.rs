//! Micro-benchmarks of the scheduler's hot paths: Filter and Score of the costly in-tree
//! plugins for one pod over 5000 nodes, the snapshot update, and queue push/pop.
//!
//! Run with `cargo bench -p kubesched-tests --bench hot_paths` (add `-- filter` to pick
//! some). CI only compiles them (clippy `--all-targets`). Plugins are built through the
//! registry with their default args, as the default profile builds them, and run one
//! after the other on one thread: these numbers are per-plugin costs, the end-to-end
//! numbers come from `kubesched bench`.

use std::sync::Arc;

use divan::{Bencher, black_box};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{CycleState, Handle};
use kubesched_sim::{Simulation, SimulationOptions};
use kubesched_testing::{NodeBuilder, PluginHarness, PodBuilder, node_info, node_term};

// Links every in-tree plugin into this binary so the registry has them.
use kubesched_tests as _;

fn main() {
    divan::main();
}

const NODES: usize = 5000;
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// The plugins benchmarked, by registered name.
const PLUGINS: &[&str] = &[
    "NodeResourcesFit",
    "TaintToleration",
    "NodeAffinity",
    "InterPodAffinity",
    "PodTopologySpread",
];

fn node(i: usize) -> NodeBuilder {
    let b = NodeBuilder::new(&format!("node-{i}"))
        .zone(ZONES[i % ZONES.len()])
        .capacity(&[("cpu", "4"), ("memory", "32Gi"), ("pods", "110")]);
    // Some nodes are tainted, so TaintToleration's Filter and Score have work to do.
    if i.is_multiple_of(10) {
        b.taint("dedicated", "infra", "NoSchedule")
    } else if i.is_multiple_of(7) {
        b.taint("spot", "true", "PreferNoSchedule")
    } else {
        b
    }
}

/// Two running pods per node: one plain, one with the labels and affinity terms the
/// benchmarked pod's constraints look at.
fn cluster() -> Vec<Arc<NodeInfo>> {
    (0..NODES)
        .map(|i| {
            let name = format!("node-{i}");
            let plain = PodBuilder::new(&format!("plain-{i}"))
                .namespace("bench")
                .label("app", "plain")
                .container(&[("cpu", "100m"), ("memory", "500Mi")])
                .node(&name)
                .info();
            let colored = PodBuilder::new(&format!("colored-{i}"))
                .namespace("bench")
                .label("color", if i.is_multiple_of(2) { "blue" } else { "green" })
                .container(&[("cpu", "100m"), ("memory", "500Mi")])
                .preferred_pod_affinity(1, &[("color", "blue")], "kubernetes.io/hostname")
                .node(&name)
                .info();
            node_info(node(i), &[plain, colored])
        })
        .collect()
}

/// The pod under test: it requests resources, tolerates nothing, and has the constraint
/// each plugin evaluates (node affinity, pod affinity and anti-affinity, spreading).
fn pod() -> Arc<PodInfo> {
    PodBuilder::new("incoming")
        .namespace("bench")
        .label("color", "blue")
        .container(&[("cpu", "100m"), ("memory", "500Mi")])
        .node_affinity("topology.kubernetes.io/zone", "In", &["zone-a", "zone-b"])
        .preferred_node_term(
            1,
            node_term("topology.kubernetes.io/zone", "In", &["zone-a"]),
        )
        .pod_affinity(&[("color", "blue")], "topology.kubernetes.io/zone")
        .pod_anti_affinity(&[("color", "green")], "kubernetes.io/hostname")
        .preferred_pod_affinity(1, &[("app", "plain")], "kubernetes.io/hostname")
        .spread_constraint(
            5,
            "topology.kubernetes.io/zone",
            "DoNotSchedule",
            &[("color", "blue")],
        )
        .spread_constraint(
            1,
            "kubernetes.io/hostname",
            "ScheduleAnyway",
            &[("color", "blue")],
        )
        .info()
}

struct Case {
    harness: PluginHarness,
    nodes: Vec<Arc<NodeInfo>>,
    pod: Arc<PodInfo>,
}

impl Case {
    fn new(plugin: &str) -> Self {
        let harness = PluginHarness::from_registry(plugin, None, Handle::builder())
            .unwrap_or_else(|e| panic!("{plugin}: {e}"));
        let nodes = harness.set_nodes(&cluster());
        Self {
            harness,
            nodes,
            pod: pod(),
        }
    }

    /// A freshly built plugin over the same nodes.
    fn fresh_plugin(&self, plugin: &str) -> Self {
        let harness = PluginHarness::from_registry(plugin, None, Handle::builder())
            .unwrap_or_else(|e| panic!("{plugin}: {e}"));
        harness.set_nodes_as_is(&self.nodes);
        Self {
            harness,
            nodes: self.nodes.clone(),
            pod: Arc::clone(&self.pod),
        }
    }

    /// PreFilter, then Filter on every node; the number of feasible nodes.
    fn filter_all(&self) -> usize {
        let plugin = self.harness.plugin();
        let mut state = CycleState::new();
        if let Some(pf) = plugin.as_pre_filter() {
            let (_, status) = pf.pre_filter(&mut state, &self.pod, &self.nodes);
            if status.is_skip() {
                return self.nodes.len();
            }
        }
        let Some(f) = plugin.as_filter() else {
            return self.nodes.len();
        };
        self.nodes
            .iter()
            .filter(|n| f.filter(&state, &self.pod, n).is_success())
            .count()
    }

    /// PreScore, Score on every node, NormalizeScore; the sum of the scores.
    fn score_all(&self) -> i64 {
        let plugin = self.harness.plugin();
        let Some(score) = plugin.as_score() else {
            return 0;
        };
        let mut state = CycleState::new();
        if let Some(ps) = plugin.as_pre_score() {
            let status = ps.pre_score(&mut state, &self.pod, &self.nodes);
            if status.is_skip() {
                return 0;
            }
        }
        let mut scores: Vec<i64> = self
            .nodes
            .iter()
            .map(|n| score.score(&state, &self.pod, n).unwrap_or(0))
            .collect();
        if score.has_normalize_score() {
            let _ = score.normalize_score(&state, &self.pod, &self.nodes, &mut scores);
        }
        scores.iter().sum()
    }
}

/// The node list of the next cycle in steady state: one node's object replaced (as after
/// the previous pod was assumed there), so plugins that keep per-node results across
/// cycles redo one node.
fn one_node_changed(nodes: &[Arc<NodeInfo>], round: &std::cell::Cell<usize>) -> Vec<Arc<NodeInfo>> {
    let mut next = nodes.to_vec();
    let i = round.get() % next.len();
    round.set(round.get() + 1);
    next[i] = Arc::new((*next[i]).clone());
    next
}

impl Case {
    /// The same plugin on a node list with one node changed.
    fn next_cycle(&self, round: &std::cell::Cell<usize>) -> Self {
        let nodes = one_node_changed(&self.nodes, round);
        self.harness.set_nodes_as_is(&nodes);
        Self {
            harness: self.harness.clone(),
            nodes,
            pod: Arc::clone(&self.pod),
        }
    }
}

/// PreFilter + Filter of one pod over 5000 nodes, in steady state (one node changed since
/// the previous pod).
#[divan::bench(args = PLUGINS, sample_count = 30)]
fn filter(bencher: Bencher<'_, '_>, plugin: &str) {
    let case = Case::new(plugin);
    let round = std::cell::Cell::new(0);
    case.filter_all();
    bencher
        .counter(divan::counter::ItemsCount::new(NODES))
        .with_inputs(|| case.next_cycle(&round))
        .bench_local_refs(|c| black_box(c.filter_all()));
}

/// PreScore + Score + NormalizeScore of one pod over 5000 nodes, in steady state.
#[divan::bench(args = PLUGINS, sample_count = 30)]
fn score(bencher: Bencher<'_, '_>, plugin: &str) {
    let case = Case::new(plugin);
    let round = std::cell::Cell::new(0);
    case.score_all();
    bencher
        .counter(divan::counter::ItemsCount::new(NODES))
        .with_inputs(|| case.next_cycle(&round))
        .bench_local_refs(|c| black_box(c.score_all()));
}

/// PreFilter + Filter for the first pod of its kind: a freshly built plugin, so nothing
/// is kept from an earlier cycle.
#[divan::bench(args = PLUGINS, sample_count = 10)]
fn filter_first_pod(bencher: Bencher<'_, '_>, plugin: &str) {
    let case = Case::new(plugin);
    bencher
        .counter(divan::counter::ItemsCount::new(NODES))
        .with_inputs(|| case.fresh_plugin(plugin))
        .bench_local_refs(|c| black_box(c.filter_all()));
}

/// PreScore + Score + NormalizeScore for the first pod of its kind.
#[divan::bench(args = PLUGINS, sample_count = 10)]
fn score_first_pod(bencher: Bencher<'_, '_>, plugin: &str) {
    let case = Case::new(plugin);
    bencher
        .counter(divan::counter::ItemsCount::new(NODES))
        .with_inputs(|| case.fresh_plugin(plugin))
        .bench_local_refs(|c| black_box(c.score_all()));
}

mod snapshot {
    use std::sync::Arc;
    use std::time::Duration;

    use divan::{Bencher, black_box};
    use kubesched_cache::Cache;
    use kubesched_framework::Snapshot;
    use kubesched_framework::clock::FakeClock;
    use kubesched_testing::PodBuilder;

    use super::{NODES, node};

    fn filled_cache() -> Cache {
        let cache = Cache::new(Duration::ZERO, Arc::new(FakeClock::new()));
        for i in 0..NODES {
            cache.add_node(node(i).model());
            let pod = PodBuilder::new(&format!("running-{i}"))
                .container(&[("cpu", "100m"), ("memory", "500Mi")])
                .node(&format!("node-{i}"))
                .info();
            cache
                .add_pod(pod)
                .unwrap_or_else(|e| panic!("adding a pod: {e}"));
        }
        cache
    }

    /// A scheduling cycle's update after one pod was assumed (and the previous one
    /// forgotten): the incremental path every cycle takes.
    #[divan::bench(sample_count = 50)]
    fn update_after_one_assume(bencher: Bencher<'_, '_>) {
        let cache = filled_cache();
        let mut snapshot = Snapshot::default();
        cache
            .update_snapshot(&mut snapshot)
            .unwrap_or_else(|e| panic!("first update: {e}"));
        let mut i = 0usize;
        bencher.bench_local(|| {
            i += 1;
            let pod = PodBuilder::new(&format!("assumed-{i}"))
                .container(&[("cpu", "100m")])
                .node(&format!("node-{}", i % NODES))
                .info();
            let uid = pod.uid.clone();
            cache
                .assume_pod(pod)
                .unwrap_or_else(|e| panic!("assume: {e}"));
            let result = cache.update_snapshot(&mut snapshot);
            cache
                .forget_pod(&uid)
                .unwrap_or_else(|e| panic!("forget: {e}"));
            black_box(result.is_ok())
        });
    }

    /// Building a snapshot of 5000 nodes from nothing (the first cycle, or after a node
    /// was added or removed).
    #[divan::bench(sample_count = 20)]
    fn full_rebuild(bencher: Bencher<'_, '_>) {
        let cache = filled_cache();
        bencher.bench_local(|| {
            let mut snapshot = Snapshot::default();
            let result = cache.update_snapshot(&mut snapshot);
            black_box((result.is_ok(), snapshot.num_nodes()))
        });
    }
}

mod queue {
    use super::*;

    const PODS: usize = 1000;

    /// Adds 1000 pending pods to the default profile's queue, then pops each and marks it
    /// done, as the scheduling loop does.
    #[divan::bench(sample_count = 30)]
    fn push_pop_1000(bencher: Bencher<'_, '_>) {
        let sim = Simulation::new(
            &kubesched_config::default_config(),
            SimulationOptions {
                seed: Some(0),
                explain: None,
                progress: None,
            },
        )
        .unwrap_or_else(|e| panic!("simulation: {e}"));
        let queue = sim.scheduler().queue().clone();
        let pods: Vec<Arc<PodInfo>> = (0..PODS)
            .map(|i| {
                PodBuilder::new(&format!("pending-{i}"))
                    .priority((i % 3) as i32)
                    .container(&[("cpu", "100m")])
                    .info()
            })
            .collect();
        bencher
            .counter(divan::counter::ItemsCount::new(PODS))
            .bench_local(|| {
                for p in &pods {
                    queue.add(p.clone());
                }
                let mut popped = 0usize;
                while let Some(qpi) = queue.pop() {
                    queue.done(&qpi.pod_info.uid);
                    popped += 1;
                }
                black_box(popped)
            });
    }
}
