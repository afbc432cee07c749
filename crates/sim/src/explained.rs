//! The explained attempts of a run, condensed to what the HTML report draws from them
//! ([`ExplainedPods`]): per pod, the attempts its section can show (the best scored nodes,
//! the rejected nodes grouped by plugin and reasons, what preemption considered), and the
//! newest attempt's Filter reasons (with the nodes that gave them) and score counts.
//!
//! A run that explains every pod for the report condenses each attempt as it is recorded
//! (`Simulation::condense_explanations`) instead of keeping every node's verdict of every
//! attempt. This module only reads explanations; it neither schedules nor renders.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kubesched_framework::{NodeRemedy, PreemptionExplanation};
use kubesched_scheduler::{Explanation, NodeExplanation};
use serde::Serialize;

use crate::report::{PodState, SimReport};

/// Feasible nodes shown per attempt.
pub const TOP_FEASIBLE: usize = 5;
/// Attempts listed per pod.
pub const MAX_HISTORY: usize = 20;
/// Node names shown per group of rejected nodes.
pub(crate) const GROUP_EXAMPLES: usize = 5;

/// Nodes that one attempt's Filter rejected with the same plugin and reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RejectedGroup {
    /// The rejecting plugin (`Extender` for an extender).
    pub plugin: String,
    /// Its reasons.
    pub reasons: Vec<String>,
    /// How many nodes.
    pub nodes: usize,
    /// The first few of them, in the order they were tried.
    pub examples: Vec<String>,
    /// What would make the first of them fit.
    pub remedies: Vec<NodeRemedy>,
}

/// One explained attempt of a pod, condensed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptSection {
    /// Which attempt (1 for the first), when known.
    pub attempt: Option<u32>,
    /// The profile.
    pub profile: String,
    /// Feasible nodes.
    pub feasible: usize,
    /// Nodes the attempt did not examine, having found enough feasible ones.
    pub unexamined: usize,
    /// The best scored feasible nodes, best first (at most [`TOP_FEASIBLE`], plus the node
    /// the pod was bound to when it is not among them).
    pub top: Vec<NodeExplanation>,
    /// The node the pod was bound to after this attempt, if any.
    pub chosen: Option<String>,
    /// Rejected nodes grouped by plugin and reasons, largest group first.
    pub rejected: Vec<RejectedGroup>,
    /// What preemption considered, when no node fit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionExplanation>,
}

/// An attempt's section, and apart from it the verdict of `bound` (the node the attempt
/// bound the pod to) when that node is not among the best scored.
pub(crate) fn attempt_section(
    e: &Explanation,
    bound: Option<&str>,
) -> (AttemptSection, Option<NodeExplanation>) {
    let mut feasible: Vec<&NodeExplanation> = e.nodes.iter().filter(|n| n.feasible).collect();
    feasible.sort_by_key(|n| std::cmp::Reverse(n.total_score));
    let top: Vec<NodeExplanation> = feasible
        .iter()
        .take(TOP_FEASIBLE)
        .map(|n| (*n).clone())
        .collect();
    let extra = bound
        .filter(|chosen| !top.iter().any(|n| n.node == *chosen))
        .and_then(|chosen| feasible.iter().find(|n| n.node == chosen))
        .map(|n| (*n).clone());
    let mut groups: Vec<RejectedGroup> = Vec::new();
    let mut index: BTreeMap<(&str, &[String]), usize> = BTreeMap::new();
    for n in e.nodes.iter().filter(|n| !n.feasible) {
        let plugin = n.rejected_by.as_deref().unwrap_or("?");
        let at = *index
            .entry((plugin, n.reasons.as_slice()))
            .or_insert_with(|| {
                groups.push(RejectedGroup {
                    plugin: plugin.to_string(),
                    reasons: n.reasons.clone(),
                    nodes: 0,
                    examples: Vec::new(),
                    remedies: n.remedies.clone(),
                });
                groups.len() - 1
            });
        let g = &mut groups[at];
        g.nodes += 1;
        if g.examples.len() < GROUP_EXAMPLES {
            g.examples.push(n.node.clone());
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.nodes));
    let section = AttemptSection {
        attempt: e.attempt,
        profile: e.profile.clone(),
        feasible: feasible.len(),
        unexamined: e.unexamined,
        top,
        chosen: None,
        rejected: groups,
        preemption: e.preemption.clone(),
    };
    (section, extra)
}

/// What the page keeps of one explained attempt: its section without the node it was bound
/// to (known only once the run is over), and that node's verdict when it is not among the
/// best scored.
#[derive(Debug, Clone)]
pub(crate) struct KeptAttempt {
    /// The section, `chosen` unset.
    pub(crate) section: AttemptSection,
    /// The verdict of the node the attempt bound the pod to, when not in `section.top`.
    pub(crate) bound: Option<NodeExplanation>,
}

/// What the page keeps of one pod's explained attempts.
#[derive(Debug, Default)]
pub(crate) struct ExplainedPod {
    /// Explained attempts seen.
    pub(crate) count: usize,
    /// Whether any of them holds what preemption considered.
    pub(crate) any_preemption: bool,
    /// The attempts a section can show: every one while there are at most three; then the
    /// first [`MAX_HISTORY`] that hold what preemption considered, and the newest.
    pub(crate) kept: Vec<KeptAttempt>,
    /// The newest attempt's Filter reasons, each with the distinct nodes that gave it.
    pub(crate) reasons: Vec<(String, Vec<u32>)>,
    /// The newest attempt's normalised scores, per Score plugin in order of first
    /// appearance, with its weight: how many nodes got each score.
    pub(crate) scores: Vec<(String, i64, BTreeMap<i64, usize>)>,
}

/// The explained attempts of a run, condensed to what the page draws from them: per pod,
/// the attempts its section can show (best scored nodes, rejected nodes grouped by
/// reason, preemption), and the newest attempt's reasons (with the nodes that gave them)
/// and score counts. A run that explains every pod for the page records into this as it
/// goes (`Simulation::condense_explanations`) instead of keeping every node's verdict of
/// every attempt.
#[derive(Debug, Default)]
pub struct ExplainedPods {
    pub(crate) pods: HashMap<String, ExplainedPod>,
    /// Node names as small numbers, for the distinct-node counts of the reasons.
    nodes: HashMap<String, u32>,
}

impl ExplainedPods {
    /// Nothing recorded yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The explanations of a finished report, each pod's last attempt bound to the node
    /// the pod ended on when it ended Scheduled.
    pub fn of_report(report: &SimReport) -> Self {
        let bound: HashMap<String, &str> = report
            .pods
            .iter()
            .filter(|p| p.status == PodState::Scheduled)
            .filter_map(|p| Some((p.key(), p.node.as_deref()?)))
            .collect();
        let mut remaining: HashMap<&str, usize> = HashMap::new();
        for e in &report.explanations {
            *remaining.entry(e.pod.as_str()).or_default() += 1;
        }
        let mut out = Self::new();
        for e in &report.explanations {
            let left = remaining.entry(e.pod.as_str()).or_default();
            *left -= 1;
            let node = if *left == 0 {
                bound.get(&e.pod).copied()
            } else {
                None
            };
            out.record(e, node);
        }
        out
    }

    /// Whether no attempt was recorded.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Condenses one attempt's explanation; `bound` is the node the attempt bound the pod
    /// to, when it did.
    pub fn record(&mut self, e: &Explanation, bound: Option<&str>) {
        let mut reasons: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
        let mut scores: Vec<(String, i64, BTreeMap<i64, usize>)> = Vec::new();
        for n in &e.nodes {
            if !n.feasible && !n.reasons.is_empty() {
                let next = self.nodes.len() as u32;
                let id = match self.nodes.get(n.node.as_str()) {
                    Some(&id) => id,
                    None => *self.nodes.entry(n.node.clone()).or_insert(next),
                };
                for r in &n.reasons {
                    reasons.entry(r.as_str()).or_default().insert(id);
                }
            }
            for (k, s) in n.scores.iter().enumerate() {
                // Every node lists the plugins in the same order: look there first.
                let at = match scores.get(k) {
                    Some((name, _, _)) if *name == s.plugin => Some(k),
                    _ => scores.iter().position(|(name, _, _)| *name == s.plugin),
                };
                let at = at.unwrap_or_else(|| {
                    scores.push((s.plugin.clone(), s.weight, BTreeMap::new()));
                    scores.len() - 1
                });
                *scores[at].2.entry(s.normalized).or_default() += 1;
            }
        }
        let (section, extra) = attempt_section(e, bound);
        let pod = self.pods.entry(e.pod.clone()).or_default();
        pod.count += 1;
        pod.any_preemption |= section.preemption.is_some();
        if pod.count > 3 {
            // A section of a pod with more than three attempts shows the ones that hold
            // what preemption considered (the first MAX_HISTORY) and the last.
            let mut with_preemption = 0;
            pod.kept.retain(|a| {
                let keep = a.section.preemption.is_some() && with_preemption < MAX_HISTORY;
                with_preemption += usize::from(keep);
                keep
            });
        }
        pod.kept.push(KeptAttempt {
            section,
            bound: extra,
        });
        pod.reasons = reasons
            .into_iter()
            .map(|(r, ids)| (r.to_string(), ids.into_iter().collect()))
            .collect();
        pod.scores = scores;
    }
}
