//! What a preemption (PostFilter) plugin considered, recorded only when someone asked for
//! an explanation of the attempt (`kubesched simulate --explain`).
//!
//! The scheduler puts a [`PreemptionExplainer`] in the cycle state of an explained attempt
//! before PostFilter runs; a plugin that finds it there records a
//! [`PreemptionExplanation`]. Attempts nobody explains carry no explainer, so the plugin's
//! normal path pays one cycle-state lookup per preemption and builds nothing.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use serde::Serialize;

use crate::CycleState;

/// The request for, and the collected, preemption explanations of one attempt. Cloning it
/// (as preemption's dry runs clone the cycle state) shares the same collection.
#[derive(Debug, Clone, Default)]
pub struct PreemptionExplainer(Arc<Mutex<Vec<PreemptionExplanation>>>);

impl PreemptionExplainer {
    /// The explainer of this attempt, when it is being explained.
    pub fn requested(state: &CycleState) -> Option<&Self> {
        state.read::<Self>()
    }

    /// Records what a plugin considered.
    pub fn record(&self, explanation: PreemptionExplanation) {
        self.0.lock().push(explanation);
    }

    /// Takes everything recorded so far, in order.
    pub fn take(&self) -> Vec<PreemptionExplanation> {
        std::mem::take(&mut *self.0.lock())
    }
}

/// One criterion of upstream's `pickOneNodeForPreemption`, in the order they are applied,
/// plus how a choice without a contest was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptionCriterion {
    /// There was one candidate.
    OnlyCandidate,
    /// Fewest victims whose eviction violates a PodDisruptionBudget.
    FewestPdbViolations,
    /// Lowest priority of the most important victim.
    LowestHighestPriority,
    /// Lowest sum of the victims' priorities.
    LowestPrioritySum,
    /// Fewest victims.
    FewestVictims,
    /// Latest start among the highest-priority victims (they lose the least work).
    LatestStartTime,
    /// Still tied after every criterion: the first candidate in dry-run order.
    FirstCandidate,
}

impl PreemptionCriterion {
    /// The criteria of `pickOneNodeForPreemption`, in the order they are applied.
    pub const ORDER: [Self; 5] = [
        Self::FewestPdbViolations,
        Self::LowestHighestPriority,
        Self::LowestPrioritySum,
        Self::FewestVictims,
        Self::LatestStartTime,
    ];

    /// Words for people.
    pub fn describe(self) -> &'static str {
        match self {
            Self::OnlyCandidate => "the only candidate",
            Self::FewestPdbViolations => "fewest PodDisruptionBudget violations",
            Self::LowestHighestPriority => "lowest highest victim priority",
            Self::LowestPrioritySum => "lowest sum of victim priorities",
            Self::FewestVictims => "fewest victims",
            Self::LatestStartTime => "latest start time of the highest-priority victims",
            Self::FirstCandidate => "tied on every criterion: first candidate in dry-run order",
        }
    }
}

impl fmt::Display for PreemptionCriterion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A pod that would be evicted on a candidate node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VictimExplanation {
    /// `namespace/name`.
    pub pod: String,
    /// Its priority.
    pub priority: i32,
    /// When it started (RFC 3339), or null when it has not started.
    pub start_time: Option<String>,
    /// Whether the evaluator counted its eviction as a PodDisruptionBudget violation.
    pub violates_pdb: bool,
}

/// A node where the pod would fit once its victims are gone, with the values the choice
/// between candidates compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateExplanation {
    /// The node.
    pub node: String,
    /// The victims, most important first.
    pub victims: Vec<VictimExplanation>,
    /// Victims whose eviction violates a PodDisruptionBudget.
    pub pdb_violations: usize,
    /// Priority of the most important victim.
    pub highest_priority: i32,
    /// Sum of the victims' priorities.
    pub priority_sum: i64,
    /// Earliest start among the highest-priority victims (RFC 3339), or null when they
    /// have not started.
    pub earliest_start_of_highest_priority: Option<String>,
    /// The criterion on which this candidate lost; null for the chosen one.
    pub eliminated_by: Option<PreemptionCriterion>,
}

/// A node the dry run tried that gave no candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedPreemptionNode {
    /// The node.
    pub node: String,
    /// Why preemption cannot make room there.
    pub reasons: Vec<String>,
}

/// Everything one preemption plugin considered for one attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PreemptionExplanation {
    /// The plugin.
    pub plugin: String,
    /// Why the pod may not preempt at all (`preemptionPolicy: Never`, ...); null when
    /// it may.
    pub not_eligible: Option<String>,
    /// Nodes where evicting lower-priority pods would make room, in dry-run order.
    pub candidates: Vec<CandidateExplanation>,
    /// Nodes tried that gave no candidate.
    pub rejected: Vec<RejectedPreemptionNode>,
    /// Nodes where Filter said preemption cannot help (not tried).
    pub not_helpful: usize,
    /// Nodes preemption might have helped that the dry run did not reach, because it had
    /// found enough candidates.
    pub not_tried: usize,
    /// The node the pod is nominated to.
    pub chosen: Option<String>,
    /// The criterion that settled the choice.
    pub decided_by: Option<PreemptionCriterion>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_collection_and_take_empties_it() {
        let mut state = CycleState::new();
        assert!(PreemptionExplainer::requested(&state).is_none());
        let explainer = PreemptionExplainer::default();
        state.write(explainer.clone());
        let dry_run_copy = state.clone();
        PreemptionExplainer::requested(&dry_run_copy)
            .expect("copied with the state")
            .record(PreemptionExplanation {
                plugin: "P".into(),
                ..Default::default()
            });
        let got = explainer.take();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].plugin, "P");
        assert!(explainer.take().is_empty());
    }

    #[test]
    fn criteria_serialize_in_snake_case() {
        assert_eq!(
            serde_json::to_string(&PreemptionCriterion::FewestPdbViolations).ok(),
            Some("\"fewest_pdb_violations\"".to_string())
        );
    }
}
