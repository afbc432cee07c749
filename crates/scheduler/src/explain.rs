//! Per-node Filter results and per-plugin scores of one attempt, with each extender's
//! verdict and score, for `--explain`.

use kubesched_framework::{NodeRemedy, PreemptionExplanation, Status};
use serde::Serialize;

/// One Score plugin's contribution on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginScoreExplanation {
    /// The plugin.
    pub plugin: String,
    /// What the plugin returned.
    pub raw: i64,
    /// After NormalizeScore.
    pub normalized: i64,
    /// The plugin's weight.
    pub weight: i64,
    /// normalized × weight.
    pub weighted: i64,
}

/// One extender's verdict and score on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ExtenderExplanation {
    /// The extender (its URL prefix).
    pub extender: String,
    /// `Passed`, `Failed`, `FailedAndUnresolvable`, `Error`, `IgnoredError` (the extender
    /// is ignorable) or `NotInterested` (the pod uses none of its managed resources).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// The extender's reason, or the error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The score the extender gave (0..=10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
    /// The extender's weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
    /// score × weight × 10: what the node's total gets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weighted: Option<i64>,
    /// The prioritize call failed (the extender then adds nothing, as upstream).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_error: Option<String>,
}

/// One node's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeExplanation {
    /// The node.
    pub node: String,
    /// Whether every Filter plugin and every extender passed.
    pub feasible: bool,
    /// The plugin that rejected the node (`Extender` for an extender).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected_by: Option<String>,
    /// The code of the rejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// What would make each rejecting Filter plugin accept the node, as the plugins
    /// computed it (every rejecting plugin, not only the first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remedies: Vec<NodeRemedy>,
    /// Scores, when the node was scored.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<PluginScoreExplanation>,
    /// Each extender's filter verdict and score, in the order they were consulted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extenders: Vec<ExtenderExplanation>,
    /// Σ weighted scores, extenders' included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_score: Option<i64>,
}

impl NodeExplanation {
    /// A node's Filter verdict, not yet scored.
    pub fn from_status(node: &str, status: &Status) -> Self {
        let ok = status.is_success();
        Self {
            node: node.to_string(),
            feasible: ok,
            rejected_by: (!ok).then(|| status.plugin().unwrap_or_default().to_string()),
            code: (!ok).then(|| status.code().as_str().to_string()),
            reasons: status.reasons().to_vec(),
            remedies: Vec::new(),
            scores: Vec::new(),
            extenders: Vec::new(),
            total_score: None,
        }
    }
}

/// Why a pod went where it went, or nowhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// `namespace/name`.
    pub pod: String,
    /// The profile that scheduled it.
    pub profile: String,
    /// Which attempt of the pod this is (1 for the first), when the observer counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Every node, in the order they are tried (the examined ones only, when the
    /// observer asked for `ExplanationScope::Examined`).
    pub nodes: Vec<NodeExplanation>,
    /// Nodes the attempt did not examine, having found enough feasible ones
    /// (percentageOfNodesToScore): left out of `nodes`.
    #[serde(skip_serializing_if = "is_zero")]
    pub unexamined: usize,
    /// What preemption considered when no node fit: candidates, victims, the choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionExplanation>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
