//! `DefaultPreemptionArgs`: how many candidate nodes a preemption dry run looks for.

use kubesched_framework::registry::PluginArgs;
use serde::{Deserialize, Serialize};

/// Default `minCandidateNodesPercentage`.
pub const DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE: i32 = 10;
/// Default `minCandidateNodesAbsolute`.
pub const DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE: i32 = 100;

/// Arguments of the DefaultPreemption plugin (`pluginConfig[].args`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DefaultPreemptionArgs {
    /// The dry run looks for at least this percentage of the nodes that preemption might
    /// help (0..=100, default 10).
    pub min_candidate_nodes_percentage: i32,
    /// ... and at least this many of them (>= 0, default 100). The larger of the two is
    /// used, capped at the number of such nodes; both 0 is refused.
    pub min_candidate_nodes_absolute: i32,
}

impl Default for DefaultPreemptionArgs {
    fn default() -> Self {
        Self {
            min_candidate_nodes_percentage: DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE,
            min_candidate_nodes_absolute: DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE,
        }
    }
}

impl DefaultPreemptionArgs {
    /// How many candidates a dry run over `num_nodes` potential nodes must find: the
    /// percentage of them, raised to the absolute minimum, capped at `num_nodes`.
    pub fn num_candidates(&self, num_nodes: usize) -> usize {
        let nodes = i64::try_from(num_nodes).unwrap_or(i64::MAX);
        let by_percentage =
            nodes.saturating_mul(i64::from(self.min_candidate_nodes_percentage)) / 100;
        let n = by_percentage
            .max(i64::from(self.min_candidate_nodes_absolute))
            .min(nodes)
            .max(0);
        usize::try_from(n).unwrap_or(num_nodes)
    }
}

impl PluginArgs for DefaultPreemptionArgs {
    const KIND: &'static str = "DefaultPreemptionArgs";

    fn validate(&self, _gates: &kubesched_framework::FeatureGates) -> Result<(), String> {
        // Same checks and wording as upstream's field errors, aggregated the same way.
        let pct = self.min_candidate_nodes_percentage;
        let abs = self.min_candidate_nodes_absolute;
        let mut errs = Vec::new();
        if !(0..=100).contains(&pct) {
            errs.push(format!(
                "minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]"
            ));
        }
        if abs < 0 {
            errs.push(format!(
                "minCandidateNodesAbsolute: Invalid value: {abs}: not in valid range [0, inf)"
            ));
        }
        if pct == 0 && abs == 0 {
            errs.push(
                "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"
                    .to_string(),
            );
            errs.push(
                "minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage"
                    .to_string(),
            );
        }
        match errs.len() {
            0 => Ok(()),
            1 => Err(errs.remove(0)),
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }
}
