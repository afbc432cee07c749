//! Table tests of ScorePlacement and its normalisation.

use std::sync::Arc;

use kubesched_framework::model::PodInfo;
use kubesched_framework::registry;
use kubesched_framework::workload::{Placement, ProposedAssignment, SchedulingPolicy};
use kubesched_framework::{Code, ExtensionPoint};
use kubesched_testing::PodBuilder;

use super::*;

fn member(name: &str) -> Arc<PodInfo> {
    PodBuilder::new(name).pod_group("train").info()
}

fn group(scheduled: usize) -> PodGroupInfo {
    PodGroupInfo {
        namespace: "default".into(),
        name: "train".into(),
        pod_group: Arc::new(Default::default()),
        policy: SchedulingPolicy::Gang { min_count: 2 },
        pods: Vec::new(),
        scheduled: (0..scheduled)
            .map(|i| {
                PodBuilder::new(&format!("old-{i}"))
                    .pod_group("train")
                    .node("n0")
                    .info()
            })
            .collect(),
    }
}

fn assignments(placed: usize) -> PodGroupAssignments {
    PodGroupAssignments {
        placement: Arc::new(Placement::new("zone", Vec::new())),
        proposed: (0..placed)
            .map(|i| ProposedAssignment {
                pod: member(&format!("p{i}")),
                node_name: "n1".into(),
            })
            .collect(),
    }
}

/// Raw and normalised scores of placements holding `placed[i]` members each, with
/// `scheduled` members placed before the cycle.
fn scores(scheduled: usize, placed: &[usize]) -> (Vec<i64>, Result<Vec<i64>, String>) {
    let plugin = PodGroupPodsCount;
    let g = group(scheduled);
    let state = PlacementCycleState::new();
    let raw: Vec<i64> = placed
        .iter()
        .map(|&n| {
            plugin
                .score_placement(&state, &g, &assignments(n))
                .expect("score")
        })
        .collect();
    let mut normalized = raw.clone();
    let s = plugin.normalize_placement_scores(&g, &mut normalized);
    let normalized = if s.is_success() {
        Ok(normalized)
    } else {
        assert_eq!(s.code(), Code::Error);
        Err(s.message())
    };
    (raw, normalized)
}

#[test]
fn scores_table() {
    // (name, members placed before, members placed per placement, raw, normalised)
    type Row = (
        &'static str,
        usize,
        Vec<usize>,
        Vec<i64>,
        Result<Vec<i64>, String>,
    );
    let rows: Vec<Row> = vec![
        (
            "more pods placed scores higher",
            0,
            vec![4, 2, 3],
            vec![4, 2, 3],
            Ok(vec![100, 50, 75]),
        ),
        (
            "members already placed narrow the gaps",
            6,
            vec![4, 2],
            vec![10, 8],
            Ok(vec![100, 80]),
        ),
        (
            "integer division rounds down",
            0,
            vec![3, 1, 2],
            vec![3, 1, 2],
            Ok(vec![100, 33, 66]),
        ),
        ("all equal", 0, vec![2, 2], vec![2, 2], Ok(vec![100, 100])),
        (
            "no pod anywhere",
            0,
            vec![0, 0],
            vec![0, 0],
            Err(NO_PODS_ASSIGNED.to_string()),
        ),
    ];
    for (name, scheduled, placed, raw, normalized) in rows {
        assert_eq!(scores(scheduled, &placed), (raw, normalized), "{name}");
    }
}

#[test]
fn registered_as_a_placement_score_plugin() {
    let desc = registry::find(NAME).expect("registered");
    assert_eq!(
        desc.extension_points().to_vec(),
        [ExtensionPoint::PlacementScore]
    );
}
