//! Score: the three strategies over the configured resources, with upstream's integer
//! arithmetic. Per node it only reads sums the `NodeInfo` keeps, and allocates nothing.
//! PlacementScore (TopologyAwareWorkloadScheduling): a pod group's candidate placement
//! scored as one big node, always MostAllocated, with the configured resource weights.

use std::collections::BTreeSet;

use std::sync::Arc;

use kubesched_framework::dra_devices::DraExtendedDevices;
use kubesched_framework::model::resource::{CpuMemoryRequests, ScoredResource};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::workload::{
    PlacementCycleState, PlacementScorePlugin, PodGroupAssignments, PodGroupInfo,
};
use kubesched_framework::{MAX_NODE_SCORE, Status};

use crate::args::{MAX_CUSTOM_PRIORITY_SCORE, ResourceSpec, ScoringStrategy, ScoringStrategyType};

/// Utilization, in percent, at which a node is full.
const MAX_UTILIZATION: i64 = 100;

/// A shape point scaled to node scores (0..=100).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ShapePoint {
    utilization: i64,
    score: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Strategy {
    LeastAllocated,
    MostAllocated,
    RequestedToCapacityRatio(Vec<ShapePoint>),
}

/// Scores nodes by one strategy over weighted resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scorer {
    strategy: Strategy,
    resources: Vec<ResourceSpec>,
    /// `resources` resolved, in the same order.
    kinds: Vec<ScoredResource>,
}

impl Scorer {
    /// The scorer of (validated) args.
    pub(crate) fn new(args: &ScoringStrategy) -> Self {
        let strategy = match args.kind {
            ScoringStrategyType::LeastAllocated => Strategy::LeastAllocated,
            ScoringStrategyType::MostAllocated => Strategy::MostAllocated,
            ScoringStrategyType::RequestedToCapacityRatio => {
                let scale = MAX_NODE_SCORE / i64::from(MAX_CUSTOM_PRIORITY_SCORE);
                let shape = args
                    .requested_to_capacity_ratio
                    .iter()
                    .flat_map(|p| &p.shape)
                    .map(|p| ShapePoint {
                        utilization: i64::from(p.utilization),
                        score: i64::from(p.score) * scale,
                    })
                    .collect();
                Strategy::RequestedToCapacityRatio(shape)
            }
        };
        Self {
            strategy,
            resources: args.resources.clone(),
            kinds: args
                .resources
                .iter()
                .map(|r| ScoredResource::new(&r.name))
                .collect(),
        }
    }

    /// The pod's request of each configured resource, in order, with the scoring defaults
    /// for containers that request no cpu or memory.
    pub(crate) fn pod_requests(&self, pod: &PodInfo) -> Vec<i64> {
        self.resources
            .iter()
            .map(|r| pod.non_zero_requests.get(&r.name))
            .collect()
    }

    /// The node's score for a pod with these requests (aligned with the resources).
    /// `dra`: the pod's extended resources DRA may provide, with what DynamicResources
    /// found of them per node (v1.37): on a node that does not advertise such a resource,
    /// its allocatable is the node's devices of the providing class and its requested the
    /// ones taken plus the pod's.
    pub(crate) fn score(
        &self,
        node: &NodeInfo,
        pod_requests: &[i64],
        dra: Option<(&BTreeSet<String>, &DraExtendedDevices)>,
    ) -> Option<i64> {
        if self.resources.is_empty() {
            return None;
        }
        let mut node_score = 0i64;
        let mut weight_sum = 0i64;
        for ((spec, kind), &pod_request) in self.resources.iter().zip(&self.kinds).zip(pod_requests)
        {
            let (mut allocatable, mut requested) =
                kind.allocatable_and_requested(node, CpuMemoryRequests::NonZero, pod_request);
            if allocatable == 0
                && pod_request > 0
                && let Some((backed, devices)) = dra
                && backed.contains(&spec.name)
                && let Some(tally) = devices.get(node.name(), &spec.name)
            {
                allocatable = tally.allocatable;
                requested = tally.allocated + pod_request;
            }
            // Resources the node does not have (or the pod does not ask for, when scalar)
            // are left out of the average.
            if allocatable == 0 {
                continue;
            }
            let resource_score = match &self.strategy {
                Strategy::LeastAllocated => least_requested_score(requested, allocatable),
                Strategy::MostAllocated => most_requested_score(requested, allocatable),
                Strategy::RequestedToCapacityRatio(shape) => {
                    let s = ratio_score(shape, requested, allocatable);
                    // Upstream averages only the resources that scored above zero here.
                    if s <= 0 {
                        continue;
                    }
                    s
                }
            };
            node_score += resource_score * spec.weight;
            weight_sum += spec.weight;
        }
        if weight_sum == 0 {
            return Some(0);
        }
        Some(match self.strategy {
            Strategy::RequestedToCapacityRatio(_) => {
                (node_score as f64 / weight_sum as f64).round() as i64
            }
            _ => node_score / weight_sum,
        })
    }
}

impl Scorer {
    /// A placement's score for the members a pod-group cycle put in it (`group_requests`:
    /// their summed requests, aligned with the resources): the placement's nodes taken as
    /// one (allocatable and requested summed over them, the members' requests added), scored
    /// MostAllocated whatever the configured strategy, weighted by the configured
    /// resources. A resource no node of the placement has is left out.
    pub(crate) fn placement_score(&self, nodes: &[Arc<NodeInfo>], group_requests: &[i64]) -> i64 {
        let mut score = 0i64;
        let mut weight_sum = 0i64;
        for ((spec, kind), &group_request) in
            self.resources.iter().zip(&self.kinds).zip(group_requests)
        {
            let mut allocatable = 0i64;
            let mut requested = group_request;
            for node in nodes {
                let (a, r) =
                    kind.allocatable_and_requested(node, CpuMemoryRequests::NonZero, group_request);
                if a > 0 {
                    allocatable = allocatable.saturating_add(a);
                    requested = requested.saturating_add(r - group_request);
                }
            }
            if allocatable == 0 {
                continue;
            }
            score += most_requested_score(requested, allocatable) * spec.weight;
            weight_sum += spec.weight;
        }
        if weight_sum == 0 {
            0
        } else {
            score / weight_sum
        }
    }
}

impl PlacementScorePlugin for crate::NodeResourcesFit {
    fn score_placement(
        &self,
        _state: &PlacementCycleState,
        _group: &PodGroupInfo,
        assignments: &PodGroupAssignments,
    ) -> Result<i64, Status> {
        let mut requests = vec![0i64; self.scorer.resources.len()];
        for a in &assignments.proposed {
            for (sum, r) in requests.iter_mut().zip(self.scorer.pod_requests(&a.pod)) {
                *sum = sum.saturating_add(r);
            }
        }
        Ok(self
            .scorer
            .placement_score(&assignments.placement.nodes, &requests))
    }
}

/// Free capacity on a 0..=100 scale.
fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

/// Used capacity on a 0..=100 scale; requests above capacity count as full (pods without
/// requests get the non-zero defaults, which may overshoot a tiny node).
fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

fn ratio_score(shape: &[ShapePoint], requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return broken_linear(shape, MAX_UTILIZATION);
    }
    broken_linear(shape, requested * MAX_UTILIZATION / capacity)
}

/// The piecewise-linear function through the shape's points: the first score below the
/// first point, the last score above the last, linear (integer division) in between.
fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, point) in shape.iter().enumerate() {
        if p <= point.utilization {
            let Some(prev) = i.checked_sub(1).map(|j| shape[j]) else {
                return point.score;
            };
            return prev.score
                + (point.score - prev.score) * (p - prev.utilization)
                    / (point.utilization - prev.utilization);
        }
    }
    shape.last().map_or(0, |p| p.score)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(points: &[(i64, i64)]) -> Vec<ShapePoint> {
        points
            .iter()
            .map(|&(utilization, score)| ShapePoint { utilization, score })
            .collect()
    }

    #[test]
    fn broken_linear_table() {
        let s = shape(&[(10, 1), (50, 9), (80, 3)]);
        // (utilization, want)
        for (p, want) in [
            (0, 1),
            (10, 1),
            (30, 5),
            (50, 9),
            (60, 7),
            (65, 6),
            (80, 3),
            (100, 3),
        ] {
            assert_eq!(broken_linear(&s, p), want, "f({p})");
        }
        assert_eq!(broken_linear(&shape(&[(0, 100)]), 40), 100);
    }

    #[test]
    fn per_resource_scores() {
        assert_eq!(least_requested_score(1000, 4000), 75);
        assert_eq!(least_requested_score(5000, 4000), 0);
        assert_eq!(least_requested_score(1, 0), 0);
        assert_eq!(
            least_requested_score(1, 3),
            66,
            "integer division truncates"
        );
        assert_eq!(most_requested_score(1000, 4000), 25);
        assert_eq!(most_requested_score(5000, 4000), 100, "capped at full");
        assert_eq!(most_requested_score(1, 3), 33);
        let linear = shape(&[(0, 0), (100, 100)]);
        assert_eq!(ratio_score(&linear, 1, 3), 33);
        assert_eq!(ratio_score(&linear, 7, 5), 100, "over capacity is full");
    }

    /// (name, nodes' cpu/memory allocatable and requests, the members' summed cpu and
    /// memory, cpu weight, want): the placement as one node, MostAllocated.
    #[test]
    fn placement_scores_table() {
        use kubesched_testing::{NodeBuilder, PodBuilder, node_info};
        type NodeRow = (
            &'static str,
            &'static str,
            &'static [(&'static str, &'static str)],
        );
        let node = |(cpu, mem, used): NodeRow| {
            let pods: Vec<_> = used
                .iter()
                .enumerate()
                .map(|(i, (c, m))| {
                    PodBuilder::new(&format!("used-{i}"))
                        .container(&[("cpu", c), ("memory", m)])
                        .node("n")
                        .info()
                })
                .collect();
            node_info(
                NodeBuilder::new("n").capacity(&[("cpu", cpu), ("memory", mem), ("pods", "110")]),
                &pods,
            )
        };
        type Row = (&'static str, Vec<NodeRow>, [i64; 2], i64, i64);
        let gi = 1024 * 1024 * 1024;
        let rows: Vec<Row> = vec![
            (
                "empty placement of two nodes, members take a quarter of each resource",
                vec![("4", "8Gi", &[]), ("4", "8Gi", &[])],
                [2000, 4 * gi],
                1,
                25,
            ),
            (
                "what the nodes already run counts",
                vec![("4", "8Gi", &[("2", "4Gi")]), ("4", "8Gi", &[])],
                [2000, 4 * gi],
                1,
                50,
            ),
            (
                "a smaller placement is fuller",
                vec![("4", "8Gi", &[])],
                [2000, 4 * gi],
                1,
                50,
            ),
            (
                "over capacity counts as full",
                vec![("1", "1Gi", &[])],
                [2000, 4 * gi],
                1,
                100,
            ),
            (
                "resource weights: cpu 3, memory 1",
                vec![("4", "8Gi", &[])],
                [4000, 0],
                3,
                // cpu 100 × 3, memory (nothing asked, nothing running) 0 × 1, over 4.
                75,
            ),
        ];
        for (name, nodes, group, cpu_weight, want) in rows {
            let mut strategy = ScoringStrategy {
                kind: ScoringStrategyType::LeastAllocated,
                ..Default::default()
            };
            for r in &mut strategy.resources {
                if r.name == "cpu" {
                    r.weight = cpu_weight;
                }
            }
            let scorer = Scorer::new(&strategy);
            let nodes: Vec<_> = nodes.into_iter().map(node).collect();
            assert_eq!(scorer.placement_score(&nodes, &group), want, "{name}");
        }
    }
}
