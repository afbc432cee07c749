//! PodGroupPodsCount: upstream v1.37's PlacementScore plugin (TopologyAwareWorkloadScheduling,
//! alpha; in the default profile only when the gate is on). Among the placements a
//! pod-group cycle found feasible, it favours those that hold more of the group's pods:
//! a placement scores the members already placed before the cycle plus the members the
//! cycle placed within it, normalised so the best placement gets 100.
//!
//! It only reads what the cycle hands it; it schedules nothing and writes nothing.

use kubesched_framework::workload::{
    PlacementCycleState, PlacementScorePlugin, PodGroupAssignments, PodGroupInfo,
};
use kubesched_framework::{Handle, MAX_NODE_SCORE, MIN_NODE_SCORE, PluginError, Status};

/// The plugin's registered name.
pub const NAME: &str = "PodGroupPodsCount";

/// The normalisation's error when no placement holds any pod of the group (upstream's
/// words).
pub const NO_PODS_ASSIGNED: &str =
    "no pods from pod group are assigned to any of the candidate placements";

/// The PodGroupPodsCount plugin.
#[derive(Debug, Default)]
pub struct PodGroupPodsCount;

impl PodGroupPodsCount {
    /// Builds the plugin (it keeps nothing).
    pub fn new(_handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self)
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: PodGroupPodsCount,
    factory: PodGroupPodsCount::new,
}

impl PlacementScorePlugin for PodGroupPodsCount {
    fn score_placement(
        &self,
        _state: &PlacementCycleState,
        group: &PodGroupInfo,
        assignments: &PodGroupAssignments,
    ) -> Result<i64, Status> {
        // Counting the members placed before the cycle too keeps the relative gaps
        // between placements small when most of the group is already running.
        let count = group.scheduled.len() + assignments.proposed.len();
        Ok(i64::try_from(count).unwrap_or(i64::MAX))
    }

    fn has_normalize_placement_score(&self) -> bool {
        true
    }

    /// Scaled by the highest count (not by `minCount`, so a placement holding one pod
    /// fewer than the best scores only a little less).
    fn normalize_placement_scores(&self, _group: &PodGroupInfo, scores: &mut [i64]) -> Status {
        let max = scores.iter().copied().max().unwrap_or(0);
        if max <= 0 {
            return Status::error(NO_PODS_ASSIGNED);
        }
        for s in scores.iter_mut() {
            *s = MIN_NODE_SCORE + *s * (MAX_NODE_SCORE - MIN_NODE_SCORE) / max;
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests;
