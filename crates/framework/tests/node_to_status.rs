//! NodeToStatus: statuses by snapshot position and by name, kept once per distinct value.

use std::sync::Arc;

use kubesched_framework::{Code, NodeToStatus, Snapshot, Status};
use kubesched_testing::{NodeBuilder, node_infos};

fn snapshot(names: &[&str]) -> Arc<Snapshot> {
    let nodes = names.iter().map(|n| NodeBuilder::new(n)).collect();
    Arc::new(Snapshot::new(node_infos(nodes, &[])))
}

#[test]
fn by_position_and_by_name_agree() {
    let snap = snapshot(&["a", "b", "c"]);
    let mut m = NodeToStatus::for_snapshot(snap.clone());
    m.set_at(0, Status::unschedulable("Insufficient cpu"));
    m.set("c", Status::unresolvable("taint"));
    m.set("elsewhere", Status::unschedulable("Insufficient cpu"));
    assert_eq!(m.len(), 3);
    assert_eq!(
        m.get("a").map(Status::message).as_deref(),
        Some("Insufficient cpu")
    );
    assert_eq!(
        m.get_at(&snap, 2).map(Status::code),
        Some(Code::UnschedulableAndUnresolvable)
    );
    assert_eq!(m.get("b"), None);
    assert_eq!(
        m.get("elsewhere").map(Status::code),
        Some(Code::Unschedulable)
    );
    // Equal statuses are kept once, with their count.
    let counted: Vec<_> = m.counted().map(|(s, n)| (s.message(), n)).collect();
    assert_eq!(
        counted,
        [
            ("Insufficient cpu".to_string(), 2),
            ("taint".to_string(), 1)
        ]
    );
}

#[test]
fn absent_status_and_replacement() {
    let snap = snapshot(&["a", "b"]);
    let mut m = NodeToStatus::for_snapshot(snap.clone());
    m.absent = Some(Status::unresolvable("PreFilter"));
    m.set_at(1, Status::unschedulable("x"));
    m.set_at(1, Status::unschedulable("y"));
    assert_eq!(m.len(), 1);
    assert_eq!(
        m.get_at(&snap, 0).map(Status::message).as_deref(),
        Some("PreFilter")
    );
    assert_eq!(m.get("b").map(Status::message).as_deref(), Some("y"));
    let counted: Vec<_> = m.counted().map(|(s, n)| (s.message(), n)).collect();
    assert_eq!(counted, [("y".to_string(), 1)]);
    // Another snapshot's positions are looked up by name.
    let other = snapshot(&["b", "a"]);
    assert_eq!(
        m.get_at(&other, 0).map(Status::message).as_deref(),
        Some("y")
    );
}

#[test]
fn without_snapshot_everything_is_by_name() {
    let mut m = NodeToStatus::default();
    m.set("a", Status::unschedulable("x"));
    assert_eq!(m.get("a").map(Status::message).as_deref(), Some("x"));
    assert!(!m.is_empty());
}
