//! Cache tests: the pod state machine, nodes and placeholders, snapshots, image states, and a
//! property test over random operation sequences.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kubesched_framework::Snapshot;
use kubesched_framework::clock::FakeClock;
use kubesched_model::{NodeInfo, PodInfo};
use kubesched_testing::{NodeBuilder, PodBuilder};
use proptest::prelude::*;

use super::*;

const TTL: Duration = Duration::from_secs(10);

fn cache() -> (Cache, FakeClock) {
    let clock = FakeClock::new();
    (Cache::new(TTL, Arc::new(clock.clone())), clock)
}

fn pod(name: &str, node: &str, cpu: &str) -> Arc<PodInfo> {
    PodBuilder::new(name)
        .node(node)
        .container(&[("cpu", cpu)])
        .info()
}

fn node(name: &str) -> Arc<kubesched_model::Node> {
    NodeBuilder::new(name)
        .capacity(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")])
        .model()
}

fn requested_cpu(c: &Cache, node: &str) -> Option<i64> {
    c.inner
        .lock()
        .nodes
        .get(node)
        .map(|n| n.requested.milli_cpu)
}

fn snapshot_of(c: &Cache) -> Snapshot {
    let mut s = Snapshot::default();
    c.update_snapshot(&mut s).expect("consistent snapshot");
    s
}

fn names(s: &Snapshot) -> Vec<String> {
    s.list().iter().map(|n| n.name().to_string()).collect()
}

#[test]
fn assume_finish_then_add_confirms() {
    let (c, _) = cache();
    c.add_node(node("n1"));
    c.assume_pod(pod("p", "n1", "100m")).unwrap();
    assert!(c.is_assumed_pod("p"));
    assert_eq!(requested_cpu(&c, "n1"), Some(100));
    c.finish_binding("p").unwrap();
    // The bound pod as observed (its object may differ, e.g. status filled in).
    c.add_pod(pod("p", "n1", "100m")).unwrap();
    assert!(!c.is_assumed_pod("p"));
    assert_eq!(c.pod_count(), 1);
    assert_eq!(requested_cpu(&c, "n1"), Some(100));
    // Confirmed pods cannot be added again nor forgotten.
    assert!(matches!(
        c.add_pod(pod("p", "n1", "100m")),
        Err(CacheError::AlreadyAdded { .. })
    ));
    assert_eq!(
        c.forget_pod("p").unwrap_err().to_string(),
        "pod default/p(p) is not assumed, so it cannot be removed or forgotten"
    );
}

#[test]
fn assume_then_forget_frees_the_node() {
    let (c, _) = cache();
    c.add_node(node("n1"));
    c.assume_pod(pod("p", "n1", "300m")).unwrap();
    assert_eq!(
        c.assume_pod(pod("p", "n1", "300m"))
            .unwrap_err()
            .to_string(),
        "pod default/p(p) is in the cache, so can't be assumed"
    );
    c.forget_pod("p").unwrap();
    assert_eq!(c.pod_count(), 0);
    assert_eq!(requested_cpu(&c, "n1"), Some(0));
    assert!(c.get_pod("p").is_none());
    // Forgetting a pod the cache no longer has is fine.
    c.forget_pod("p").unwrap();
}

#[test]
fn assumed_pods_expire_only_after_binding_finished_and_ttl() {
    struct Case {
        name: &'static str,
        finish: bool,
        advance: Duration,
        expired: bool,
    }
    let cases = [
        Case {
            name: "binding still in progress never expires",
            finish: false,
            advance: Duration::from_secs(3600),
            expired: false,
        },
        Case {
            name: "finished, within ttl",
            finish: true,
            advance: Duration::from_secs(10),
            expired: false,
        },
        Case {
            name: "finished, past ttl",
            finish: true,
            advance: Duration::from_secs(11),
            expired: true,
        },
    ];
    for case in cases {
        let (c, clock) = cache();
        c.add_node(node("n1"));
        c.assume_pod(pod("p", "n1", "100m")).unwrap();
        if case.finish {
            c.finish_binding("p").unwrap();
        }
        clock.advance(case.advance);
        c.cleanup_expired_assumed_pods();
        assert_eq!(c.get_pod("p").is_none(), case.expired, "{}", case.name);
        let cpu = if case.expired { 0 } else { 100 };
        assert_eq!(requested_cpu(&c, "n1"), Some(cpu), "{}", case.name);
    }
}

#[test]
fn zero_ttl_never_expires() {
    let clock = FakeClock::new();
    let c = Cache::new(Duration::ZERO, Arc::new(clock.clone()));
    c.add_node(node("n1"));
    c.assume_pod(pod("p", "n1", "100m")).unwrap();
    c.finish_binding("p").unwrap();
    clock.advance(Duration::from_secs(24 * 3600));
    c.cleanup_expired_assumed_pods();
    assert!(c.is_assumed_pod("p"));
}

#[test]
fn add_of_an_expired_pod_re_adds_it() {
    let (c, clock) = cache();
    c.add_node(node("n1"));
    c.assume_pod(pod("p", "n1", "100m")).unwrap();
    c.finish_binding("p").unwrap();
    clock.advance(Duration::from_secs(30));
    c.cleanup_expired_assumed_pods();
    assert_eq!(c.pod_count(), 0);
    c.add_pod(pod("p", "n1", "100m")).unwrap();
    assert_eq!(c.pod_count(), 1);
    assert!(!c.is_assumed_pod("p"));
    assert_eq!(requested_cpu(&c, "n1"), Some(100));
}

#[test]
fn add_on_a_different_node_moves_the_assumed_pod() {
    let (c, _) = cache();
    c.add_node(node("n1"));
    c.add_node(node("n2"));
    c.assume_pod(pod("p", "n1", "200m")).unwrap();
    c.add_pod(pod("p", "n2", "200m")).unwrap();
    assert_eq!(requested_cpu(&c, "n1"), Some(0));
    assert_eq!(requested_cpu(&c, "n2"), Some(200));
    assert_eq!(
        c.get_pod("p").and_then(|p| p.node_name.clone()).as_deref(),
        Some("n2")
    );
}

#[test]
fn update_and_remove_follow_added_pods() {
    let (c, _) = cache();
    c.add_node(node("n1"));
    let p1 = pod("p", "n1", "100m");
    assert!(matches!(
        c.update_pod(&p1, pod("p", "n1", "200m")),
        Err(CacheError::NotAdded { .. })
    ));
    c.assume_pod(p1.clone()).unwrap();
    assert_eq!(
        c.update_pod(&p1, pod("p", "n1", "200m"))
            .unwrap_err()
            .to_string(),
        "assumed pod default/p(p) should not be updated"
    );
    c.add_pod(p1.clone()).unwrap();
    c.update_pod(&p1, pod("p", "n1", "250m")).unwrap();
    assert_eq!(requested_cpu(&c, "n1"), Some(250));
    assert!(matches!(
        c.update_pod(&p1, pod("p", "n2", "250m")),
        Err(CacheError::NodeMismatch { .. })
    ));
    assert!(matches!(
        c.remove_pod(&pod("p", "n2", "250m")),
        Err(CacheError::NodeMismatch { .. })
    ));
    // A stale copy without a node name still removes the pod.
    let unbound = PodBuilder::new("p").container(&[("cpu", "1")]).info();
    c.remove_pod(&unbound).unwrap();
    assert_eq!(requested_cpu(&c, "n1"), Some(0));
    assert_eq!(
        c.remove_pod(&p1).unwrap_err().to_string(),
        "pod default/p(p) is not found in scheduler cache, so cannot be removed from it"
    );
    assert!(matches!(
        c.add_pod(PodBuilder::new("q").info()),
        Err(CacheError::NoNodeName { .. })
    ));
}

#[test]
fn deleted_node_stays_as_placeholder_until_its_last_pod_goes() {
    let (c, _) = cache();
    c.add_node(node("n1"));
    c.add_node(node("n2"));
    c.add_pod(pod("a", "n1", "100m")).unwrap();
    c.add_pod(pod("b", "n1", "100m")).unwrap();
    let mut snap = snapshot_of(&c);
    assert_eq!(snap.num_nodes(), 2);

    c.remove_node("n1").unwrap();
    assert_eq!(c.node_count(), 2, "placeholder kept");
    assert!(
        c.dump()
            .nodes
            .iter()
            .any(|n| n.name == "n1" && n.placeholder)
    );
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(names(&snap), ["n2"]);
    assert_eq!(
        c.remove_node("n1").unwrap_err().to_string(),
        "node n1 is not found"
    );

    c.remove_pod(&pod("a", "n1", "100m")).unwrap();
    assert_eq!(c.node_count(), 2);
    c.remove_pod(&pod("b", "n1", "100m")).unwrap();
    assert_eq!(c.node_count(), 1, "placeholder dropped with its last pod");
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(names(&snap), ["n2"]);
}

#[test]
fn pods_before_their_node_wait_on_a_placeholder() {
    let (c, _) = cache();
    c.add_pod(pod("a", "late", "100m")).unwrap();
    assert_eq!(c.node_count(), 1);
    let mut snap = snapshot_of(&c);
    assert_eq!(snap.num_nodes(), 0);
    c.add_node(node("late"));
    c.update_snapshot(&mut snap).unwrap();
    let info = snap.get("late").expect("node in snapshot");
    assert_eq!(info.pods.len(), 1);
    assert_eq!(info.requested.milli_cpu, 100);
    // A deleted node that comes back keeps its pods.
    c.remove_node("late").unwrap();
    c.add_node(node("late"));
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(snap.get("late").map(|n| n.pods.len()), Some(1));
}

#[test]
fn snapshot_copies_only_changed_nodes_and_keeps_lists() {
    let (c, _) = cache();
    for n in ["n1", "n2", "n3"] {
        c.add_node(node(n));
    }
    let mut snap = snapshot_of(&c);
    let before = snap.clone();
    assert!(snap.have_pods_with_affinity().is_empty());

    // A plain pod: n2 is replaced in place, the others are the very same Arcs.
    c.add_pod(pod("plain", "n2", "100m")).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    assert!(Arc::ptr_eq(&before.list()[0], &snap.list()[0]));
    assert!(!Arc::ptr_eq(&before.list()[1], &snap.list()[1]));
    assert!(Arc::ptr_eq(&before.list()[2], &snap.list()[2]));
    assert_eq!(snap.get("n2").map(|n| n.requested.milli_cpu), Some(100));
    // The old snapshot is untouched (copy on write).
    assert_eq!(before.get("n2").map(|n| n.requested.milli_cpu), Some(0));

    // A pod with anti-affinity and a claim flips n3's lists.
    let special = PodBuilder::new("special")
        .node("n3")
        .label("app", "x")
        .pod_anti_affinity(&[("app", "x")], "kubernetes.io/hostname")
        .pvc("data")
        .info();
    c.add_pod(special.clone()).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    let listed = |l: &[Arc<NodeInfo>]| l.iter().map(|n| n.name().to_string()).collect::<Vec<_>>();
    assert_eq!(listed(snap.have_pods_with_affinity()), ["n3"]);
    assert_eq!(listed(snap.have_pods_with_required_anti_affinity()), ["n3"]);
    assert!(snap.is_pvc_used_by_pods("default/data"));

    c.remove_pod(&special).unwrap();
    c.update_snapshot(&mut snap).unwrap();
    assert!(snap.have_pods_with_affinity().is_empty());
    assert!(!snap.is_pvc_used_by_pods("default/data"));

    // Nothing changed: nothing is touched.
    let again = snap.clone();
    c.update_snapshot(&mut snap).unwrap();
    for (a, b) in again.list().iter().zip(snap.list()) {
        assert!(Arc::ptr_eq(a, b));
    }
}

#[test]
fn snapshot_lists_nodes_zone_by_zone() {
    let (c, _) = cache();
    for (n, z) in [
        ("a1", "a"),
        ("a2", "a"),
        ("b1", "b"),
        ("a3", "a"),
        ("c1", "c"),
    ] {
        c.add_node(NodeBuilder::new(n).zone(z).model());
    }
    let mut snap = snapshot_of(&c);
    assert_eq!(names(&snap), ["a1", "b1", "c1", "a2", "a3"]);
    // Moving a node to another zone reorders the list.
    c.update_node(NodeBuilder::new("a2").zone("b").model());
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(names(&snap), ["a1", "b1", "c1", "a3", "a2"]);
}

#[test]
fn image_states_count_nodes_at_snapshot_time() {
    let (c, _) = cache();
    let with_images = |name: &str, images: &[&str]| {
        let mut b = NodeBuilder::new(name);
        for i in images {
            b = b.image(&[i, &format!("{i}:latest")], 1000);
        }
        b.model()
    };
    c.add_node(with_images("n1", &["nginx"]));
    let mut snap = snapshot_of(&c);
    let summary = |s: &Snapshot, n: &str, i: &str| {
        s.get(n)
            .and_then(|info| info.image_states.get(i).copied())
            .map(|s| (s.size, s.num_nodes))
    };
    assert_eq!(summary(&snap, "n1", "nginx"), Some((1000, 1)));
    assert_eq!(summary(&snap, "n1", "nginx:latest"), Some((1000, 1)));

    // A second node with the image: n1's summary, although n1 did not change, follows.
    c.add_node(with_images("n2", &["nginx", "redis"]));
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(summary(&snap, "n1", "nginx"), Some((1000, 2)));
    assert_eq!(summary(&snap, "n2", "nginx"), Some((1000, 2)));
    assert_eq!(summary(&snap, "n2", "redis"), Some((1000, 1)));
    assert_eq!(summary(&snap, "n1", "redis"), None);

    // The image goes away from n2 (node update), then n2 goes away.
    c.update_node(with_images("n2", &["redis"]));
    c.update_snapshot(&mut snap).unwrap();
    assert_eq!(summary(&snap, "n1", "nginx"), Some((1000, 1)));
    assert_eq!(summary(&snap, "n2", "nginx"), None);
    c.remove_node("n2").unwrap();
    c.update_snapshot(&mut snap).unwrap();
    assert!(!c.inner.lock().images.contains_key("redis"));
}

#[test]
fn dump_shows_nodes_pods_and_assumed_pods() {
    let (c, _) = cache();
    c.add_node(node("n1"));
    c.add_pod(pod("bound", "n1", "250m")).unwrap();
    c.assume_pod(pod("assumed", "n1", "500m")).unwrap();
    c.add_pod(pod("orphan", "gone", "100m")).unwrap();
    insta::assert_yaml_snapshot!(c.dump());
}

// ---------------------------------------------------------------------------------------
// Property test: random sequences of cache operations against a small model.

const NODES: usize = 4;
const PODS: usize = 8;
const ZONES: usize = 3;
const IMAGES: usize = 4;

fn image_size(i: usize) -> i64 {
    (i as i64 + 1) * 1_000_000
}

#[derive(Debug, Clone)]
enum Op {
    UpsertNode {
        node: usize,
        zone: usize,
        images: Vec<usize>,
    },
    RemoveNode(usize),
    AddPod {
        pod: usize,
        node: usize,
        cpu: u32,
    },
    AssumePod {
        pod: usize,
        node: usize,
        cpu: u32,
    },
    FinishBinding(usize),
    ForgetPod(usize),
    UpdatePod {
        pod: usize,
        cpu: u32,
    },
    RemovePod(usize),
    Advance(u64),
    Cleanup,
    Snapshot,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..NODES, 0..ZONES, proptest::collection::vec(0..IMAGES, 0..3))
            .prop_map(|(node, zone, images)| Op::UpsertNode { node, zone, images }),
        1 => (0..NODES).prop_map(Op::RemoveNode),
        3 => (0..PODS, 0..NODES + 1, 1..500u32).prop_map(|(pod, node, cpu)| Op::AddPod { pod, node, cpu }),
        3 => (0..PODS, 0..NODES + 1, 1..500u32).prop_map(|(pod, node, cpu)| Op::AssumePod { pod, node, cpu }),
        2 => (0..PODS).prop_map(Op::FinishBinding),
        1 => (0..PODS).prop_map(Op::ForgetPod),
        2 => (0..PODS, 1..500u32).prop_map(|(pod, cpu)| Op::UpdatePod { pod, cpu }),
        1 => (0..PODS).prop_map(Op::RemovePod),
        1 => (0..15u64).prop_map(Op::Advance),
        1 => Just(Op::Cleanup),
        2 => Just(Op::Snapshot),
    ]
}

fn node_name(i: usize) -> String {
    format!("n{i}")
}

/// Pod `i` on `node` with `cpu` millicores; some pods carry affinity, claims and host ports
/// so that every part of the node accounting is exercised.
fn model_pod(i: usize, node: usize, cpu: u32) -> Arc<PodInfo> {
    let mut b = PodBuilder::new(&format!("p{i}"))
        .node(&node_name(node))
        .label("app", if i.is_multiple_of(2) { "even" } else { "odd" })
        .container(&[("cpu", &format!("{cpu}m"))]);
    if i.is_multiple_of(3) {
        b = b.pod_anti_affinity(&[("app", "even")], "kubernetes.io/hostname");
    }
    if i % 3 == 1 {
        b = b.preferred_pod_affinity(1, &[("app", "odd")], "kubernetes.io/hostname");
    }
    if i.is_multiple_of(2) {
        b = b.pvc(&format!("claim{}", i % 3));
    }
    if i.is_multiple_of(4) {
        b = b.host_port(8080, "TCP", "");
    }
    b.info()
}

fn model_node(i: usize, zone: usize, images: &[usize]) -> Arc<kubesched_model::Node> {
    let mut b = NodeBuilder::new(&node_name(i))
        .zone(&format!("z{zone}"))
        .capacity(&[("cpu", "8")]);
    for img in images.iter().collect::<BTreeSet<_>>() {
        b = b.image(&[&format!("img{img}")], image_size(*img));
    }
    b.model()
}

#[derive(Debug, Clone)]
struct ModelPod {
    node: usize,
    cpu: u32,
    assumed: bool,
    finished_at: Option<Duration>,
}

#[derive(Debug, Default)]
struct Model {
    nodes: BTreeMap<usize, Vec<usize>>,
    pods: BTreeMap<usize, ModelPod>,
}

fn fresh_info(pods: &[Arc<PodInfo>]) -> NodeInfo {
    let mut info = NodeInfo::default();
    for p in pods {
        info.add_pod(p.clone());
    }
    info
}

fn uids(pods: &[Arc<PodInfo>]) -> BTreeSet<String> {
    pods.iter().map(|p| p.uid.clone()).collect()
}

fn check_invariants(c: &Cache, m: &Model) -> Result<(), TestCaseError> {
    prop_assert_eq!(c.pod_count(), m.pods.len());
    let wanted_nodes: BTreeSet<usize> = m
        .nodes
        .keys()
        .copied()
        .chain(m.pods.values().map(|p| p.node))
        .collect();
    prop_assert_eq!(c.node_count(), wanted_nodes.len());
    for (i, mp) in &m.pods {
        let uid = format!("p{i}");
        let got = c.get_pod(&uid);
        prop_assert!(got.is_some(), "pod {} missing", uid);
        let got = got.expect("checked");
        prop_assert_eq!(got.node_name.clone(), Some(node_name(mp.node)));
        prop_assert_eq!(got.requests.milli_cpu, i64::from(mp.cpu));
        prop_assert_eq!(c.is_assumed_pod(&uid), mp.assumed);
    }
    let st = c.inner.lock();
    // Every pod is on exactly one node, the one the model says.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (name, info) in &st.nodes {
        for p in &info.pods {
            *seen.entry(p.uid.clone()).or_insert(0) += 1;
            prop_assert_eq!(p.node_name.as_deref(), Some(name.as_str()));
        }
        // Node accounting equals the sum over its pods.
        let fresh = fresh_info(&info.pods);
        prop_assert_eq!(&info.requested, &fresh.requested, "requested of {}", name);
        prop_assert_eq!(&info.non_zero_requested, &fresh.non_zero_requested);
        // The compact copy Filter and Score read agrees with the full sums.
        let (n, f) = (info.numbers(), fresh.numbers());
        prop_assert_eq!(
            (
                n.requested_milli_cpu,
                n.requested_memory,
                n.requested_ephemeral_storage
            ),
            (
                f.requested_milli_cpu,
                f.requested_memory,
                f.requested_ephemeral_storage
            )
        );
        prop_assert_eq!(
            (n.non_zero_milli_cpu, n.non_zero_memory),
            (f.non_zero_milli_cpu, f.non_zero_memory)
        );
        prop_assert_eq!(info.pod_count(), info.pods.len());
        if let Some(node) = info.node() {
            prop_assert_eq!(n.allocatable_milli_cpu, node.allocatable.milli_cpu);
            prop_assert_eq!(n.allowed_pod_number, node.allocatable.allowed_pod_number);
        }
        prop_assert_eq!(info.used_ports.entries(), fresh.used_ports.entries());
        prop_assert_eq!(&info.pvc_ref_counts, &fresh.pvc_ref_counts);
        prop_assert_eq!(
            uids(&info.pods_with_affinity),
            uids(&fresh.pods_with_affinity)
        );
        prop_assert_eq!(
            uids(&info.pods_with_required_anti_affinity),
            uids(&fresh.pods_with_required_anti_affinity)
        );
        prop_assert_eq!(
            info.node().is_none(),
            !m.nodes.keys().any(|n| node_name(*n) == *name)
        );
        prop_assert!(
            info.node().is_some() || !info.pods.is_empty(),
            "empty placeholder {}",
            name
        );
        // The generation index points at this node under its current generation.
        prop_assert_eq!(st.recency.get(&info.generation), Some(name));
    }
    prop_assert_eq!(st.recency.len(), st.nodes.len());
    prop_assert_eq!(seen.len(), m.pods.len());
    prop_assert!(
        seen.values().all(|n| *n == 1),
        "a pod on two nodes: {:?}",
        seen
    );
    prop_assert_eq!(
        st.assumed.len(),
        m.pods.values().filter(|p| p.assumed).count()
    );
    Ok(())
}

fn check_snapshot(c: &Cache, snap: &mut Snapshot, m: &Model) -> Result<(), TestCaseError> {
    prop_assert!(c.update_snapshot(snap).is_ok());
    let fresh = snapshot_of(c);
    prop_assert_eq!(names(snap), names(&fresh));
    // Same node infos: the incremental snapshot holds the cache's current copies.
    for (a, b) in snap.list().iter().zip(fresh.list()) {
        prop_assert!(Arc::ptr_eq(a, b), "stale node {} in snapshot", a.name());
    }
    let by_name = |l: &[Arc<NodeInfo>]| l.iter().map(|n| n.name().to_string()).collect::<Vec<_>>();
    prop_assert_eq!(
        by_name(snap.have_pods_with_affinity()),
        by_name(fresh.have_pods_with_affinity())
    );
    prop_assert_eq!(
        by_name(snap.have_pods_with_required_anti_affinity()),
        by_name(fresh.have_pods_with_required_anti_affinity())
    );
    // The lists hold the current node objects too, not ones from an earlier cycle.
    let lists = [
        (
            snap.have_pods_with_affinity(),
            fresh.have_pods_with_affinity(),
        ),
        (
            snap.have_pods_with_required_anti_affinity(),
            fresh.have_pods_with_required_anti_affinity(),
        ),
    ];
    for (kept, rebuilt) in lists {
        for (a, b) in kept.iter().zip(rebuilt) {
            prop_assert!(Arc::ptr_eq(a, b), "stale node {} in a list", a.name());
        }
    }
    for claim in 0..3 {
        let key = format!("default/claim{claim}");
        prop_assert_eq!(
            snap.is_pvc_used_by_pods(&key),
            fresh.is_pvc_used_by_pods(&key)
        );
        let used = m
            .pods
            .iter()
            .any(|(i, p)| i.is_multiple_of(2) && i % 3 == claim && m.nodes.contains_key(&p.node));
        prop_assert_eq!(snap.is_pvc_used_by_pods(&key), used, "claim {}", key);
    }
    // Exactly the live nodes, and their image summaries computed from scratch.
    let live: BTreeSet<String> = m.nodes.keys().map(|n| node_name(*n)).collect();
    prop_assert_eq!(names(snap).into_iter().collect::<BTreeSet<_>>(), live);
    for (n, images) in &m.nodes {
        let info = snap.get(&node_name(*n)).expect("live node in snapshot");
        let distinct: BTreeSet<usize> = images.iter().copied().collect();
        prop_assert_eq!(info.image_states.len(), distinct.len());
        for img in distinct {
            let holders = m.nodes.values().filter(|imgs| imgs.contains(&img)).count();
            let s = info.image_states.get(&format!("img{img}"));
            prop_assert_eq!(
                s.map(|s| (s.size, s.num_nodes)),
                Some((image_size(img), holders)),
                "image {} on node {}",
                img,
                n
            );
        }
        // Pods in the snapshot are the model's.
        let want: BTreeSet<String> = m
            .pods
            .iter()
            .filter(|(_, p)| p.node == *n)
            .map(|(i, _)| format!("p{i}"))
            .collect();
        prop_assert_eq!(uids(&info.pods), want);
    }
    Ok(())
}

fn apply(c: &Cache, clock: &FakeClock, m: &mut Model, op: &Op) -> Result<(), TestCaseError> {
    match op.clone() {
        Op::UpsertNode { node, zone, images } => {
            c.update_node(model_node(node, zone, &images));
            m.nodes.insert(node, images);
        }
        Op::RemoveNode(node) => {
            let ok = c.remove_node(&node_name(node)).is_ok();
            prop_assert_eq!(ok, m.nodes.remove(&node).is_some());
        }
        Op::AddPod { pod, node, cpu } => {
            let ok = c.add_pod(model_pod(pod, node, cpu)).is_ok();
            let want = m.pods.get(&pod).is_none_or(|p| p.assumed);
            prop_assert_eq!(ok, want);
            if want {
                m.pods.insert(
                    pod,
                    ModelPod {
                        node,
                        cpu,
                        assumed: false,
                        finished_at: None,
                    },
                );
            }
        }
        Op::AssumePod { pod, node, cpu } => {
            let ok = c.assume_pod(model_pod(pod, node, cpu)).is_ok();
            let want = !m.pods.contains_key(&pod);
            prop_assert_eq!(ok, want);
            if want {
                m.pods.insert(
                    pod,
                    ModelPod {
                        node,
                        cpu,
                        assumed: true,
                        finished_at: None,
                    },
                );
            }
        }
        Op::FinishBinding(pod) => {
            let uid = format!("p{pod}");
            prop_assert!(c.finish_binding(&uid).is_ok());
            if let Some(p) = m.pods.get_mut(&pod).filter(|p| p.assumed) {
                p.finished_at = Some(clock.elapsed());
            }
        }
        Op::ForgetPod(pod) => {
            let ok = c.forget_pod(&format!("p{pod}")).is_ok();
            let want = m.pods.get(&pod).is_none_or(|p| p.assumed);
            prop_assert_eq!(ok, want);
            if m.pods.get(&pod).is_some_and(|p| p.assumed) {
                m.pods.remove(&pod);
            }
        }
        Op::UpdatePod { pod, cpu } => {
            let (node, old_cpu) = m.pods.get(&pod).map_or((0, 1), |p| (p.node, p.cpu));
            let old = model_pod(pod, node, old_cpu);
            let ok = c.update_pod(&old, model_pod(pod, node, cpu)).is_ok();
            let want = m.pods.get(&pod).is_some_and(|p| !p.assumed);
            prop_assert_eq!(ok, want);
            if want && let Some(p) = m.pods.get_mut(&pod) {
                p.cpu = cpu;
            }
        }
        Op::RemovePod(pod) => {
            let (node, cpu) = m.pods.get(&pod).map_or((0, 1), |p| (p.node, p.cpu));
            let ok = c.remove_pod(&model_pod(pod, node, cpu)).is_ok();
            prop_assert_eq!(ok, m.pods.remove(&pod).is_some());
        }
        Op::Advance(secs) => clock.advance(Duration::from_secs(secs)),
        Op::Cleanup => {
            c.cleanup_expired_assumed_pods();
            let now = clock.elapsed();
            m.pods
                .retain(|_, p| !(p.assumed && p.finished_at.is_some_and(|f| now > f + TTL)));
        }
        Op::Snapshot => {}
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_operations_keep_the_cache_exact(
        ops in proptest::collection::vec(op(), 1..60),
        snapshot_every in 1usize..6,
    ) {
        let (c, clock) = cache();
        let mut m = Model::default();
        let mut snap = Snapshot::default();
        for (i, op) in ops.iter().enumerate() {
            apply(&c, &clock, &mut m, op)?;
            check_invariants(&c, &m)?;
            if matches!(op, Op::Snapshot) || i % snapshot_every == 0 {
                check_snapshot(&c, &mut snap, &m)?;
            }
        }
        check_snapshot(&c, &mut snap, &m)?;
    }
}
