//! PreScore, Score and NormalizeScore.

use std::sync::Arc;

use kubesched_framework::model::{AffinityTerm, Labels, NodeInfo, PodInfo, WeightedAffinityTerm};
use kubesched_framework::{CycleState, MAX_NODE_SCORE, PreScorePlugin, ScorePlugin, Status};
use rustc_hash::FxHashMap;

use crate::InterPodAffinity;
use crate::topology::ResolvedTerm;

/// Summed weights per topology pair. Unlike the filter counts, pairs that sum to zero are
/// kept: a pair that was touched at all makes the plugin score (as upstream). So each
/// pair also counts how many node entries touched it, and goes only when none does.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScoreMap {
    map: FxHashMap<Arc<str>, FxHashMap<Arc<str>, Touched>>,
}

/// A pair's summed weight and how many node entries added to it.
#[derive(Debug, Clone, Copy, Default)]
struct Touched {
    sum: i64,
    touches: i64,
}

impl ScoreMap {
    /// Adds (`sign` 1) or takes out (-1) one node entry of `weight` on a pair.
    fn add(&mut self, key: &str, value: &str, weight: i64, sign: i64) {
        if !self.map.contains_key(key) {
            self.map.insert(Arc::from(key), FxHashMap::default());
        }
        let Some(values) = self.map.get_mut(key) else {
            return;
        };
        if !values.contains_key(value) {
            values.insert(Arc::from(value), Touched::default());
        }
        let Some(t) = values.get_mut(value) else {
            return;
        };
        t.sum += sign * weight;
        t.touches += sign;
        if t.touches <= 0 {
            values.remove(value);
            if values.is_empty() {
                self.map.remove(key);
            }
        }
    }

    /// The node's score: the weights of every pair its labels form.
    fn score_for(&self, labels: &Labels) -> i64 {
        self.map
            .iter()
            .filter_map(|(key, values)| {
                labels
                    .get(key.as_ref())
                    .and_then(|v| values.get(v.as_str()))
            })
            .map(|t| t.sum)
            .sum()
    }

    fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// What the incoming pod's scoring depends on besides the nodes (the key of a kept
/// tally).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScoreKey {
    has_preferred: bool,
    preferred: Vec<(i64, ResolvedTerm)>,
    preferred_anti: Vec<(i64, ResolvedTerm)>,
    namespace: String,
    labels: Labels,
    namespace_labels: Labels,
}

/// Per node: summed weight per topology key of the node (the key present on the node).
pub(crate) type ScoreOnNode = Vec<(String, i64)>;

/// What PreScore computed for Score.
#[derive(Debug, Clone)]
pub(crate) struct PreScoreState {
    pub(crate) topology_score: Arc<ScoreMap>,
}

/// Adds `delta` under `key` for a node, merging with an earlier entry of the same key.
fn bump(acc: &mut ScoreOnNode, labels: &Labels, key: &str, delta: i64) {
    if !labels.contains_key(key) {
        return;
    }
    match acc.iter_mut().find(|(k, _)| k == key) {
        Some((_, n)) => *n += delta,
        None => acc.push((key.to_string(), delta)),
    }
}

/// What the weights one node contributes depend on: the incoming pod's resolved
/// preferred terms, and what existing pods' terms need to match it.
struct NodeWeigher<'a> {
    pod: &'a PodInfo,
    /// Whether the incoming pod has preferred terms of its own: then every pod of a node
    /// is read, otherwise only those with affinity terms.
    has_preferred: bool,
    preferred: &'a [(i64, ResolvedTerm)],
    preferred_anti: &'a [(i64, ResolvedTerm)],
    namespace_labels: &'a Labels,
    hard_weight: i64,
}

impl NodeWeigher<'_> {
    fn incoming_matches(&self, t: &AffinityTerm) -> bool {
        t.matches(&self.pod.namespace, self.namespace_labels, &self.pod.labels)
    }

    /// The node's summed weight per topology key it carries: the incoming pod's
    /// preferred terms matched against the node's pods, and the existing pods' required
    /// (with the hard weight) and preferred terms matched against the incoming pod.
    fn weigh(&self, info: &NodeInfo) -> ScoreOnNode {
        let mut acc = ScoreOnNode::new();
        let Some(node) = info.node() else {
            return acc;
        };
        let labels = &node.labels;
        if labels.is_empty() {
            return acc;
        }
        let pods = if self.has_preferred {
            &info.pods
        } else {
            &info.pods_with_affinity
        };
        for existing in pods {
            self.weigh_incoming_terms(&mut acc, labels, existing);
            self.weigh_existing_terms(&mut acc, labels, existing);
        }
        acc
    }

    fn weigh_incoming_terms(&self, acc: &mut ScoreOnNode, labels: &Labels, existing: &PodInfo) {
        for (w, t) in self.preferred {
            if t.matches(existing) {
                bump(acc, labels, &t.topology_key, *w);
            }
        }
        for (w, t) in self.preferred_anti {
            if t.matches(existing) {
                bump(acc, labels, &t.topology_key, -*w);
            }
        }
    }

    fn weigh_existing_terms(&self, acc: &mut ScoreOnNode, labels: &Labels, existing: &PodInfo) {
        if self.hard_weight > 0 {
            for t in &existing.required_affinity_terms {
                if self.incoming_matches(t) {
                    bump(acc, labels, &t.topology_key, self.hard_weight);
                }
            }
        }
        for wt in &existing.preferred_affinity_terms {
            if self.incoming_matches(&wt.term) {
                bump(acc, labels, &wt.term.topology_key, i64::from(wt.weight));
            }
        }
        for wt in &existing.preferred_anti_affinity_terms {
            if self.incoming_matches(&wt.term) {
                bump(acc, labels, &wt.term.topology_key, -i64::from(wt.weight));
            }
        }
    }
}

/// Adds (`sign` 1) or takes out (-1) one node's weights in the totals, under the
/// node's value of each key.
fn merge_node_weights(totals: &mut Arc<ScoreMap>, info: &NodeInfo, acc: &ScoreOnNode, sign: i64) {
    let Some(node) = info.node() else {
        return;
    };
    if acc.is_empty() {
        return;
    }
    let totals = Arc::make_mut(totals);
    for (key, weight) in acc {
        if let Some(value) = node.labels.get(key) {
            totals.add(key, value, *weight, sign);
        }
    }
}

impl InterPodAffinity {
    /// Whether PreScore has nothing to do: no nodes, or no preferred terms of the pod's
    /// own and none of the existing pods' terms to be counted.
    fn nothing_to_score(&self, nodes: &[Arc<NodeInfo>], has_preferred: bool) -> bool {
        if nodes.is_empty() {
            return true;
        }
        if self.args.ignore_preferred_terms_of_existing_pods && !has_preferred {
            return true;
        }
        // Without preferred terms of its own, only pods with affinity terms can score it.
        !has_preferred && self.handle.snapshot().have_pods_with_affinity().is_empty()
    }
}

impl PreScorePlugin for InterPodAffinity {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        let has_preferred = !pod.preferred_affinity_terms.is_empty()
            || !pod.preferred_anti_affinity_terms.is_empty();
        if self.nothing_to_score(nodes, has_preferred) {
            return Status::skip();
        }
        let snapshot = self.handle.snapshot();
        let objects = self.handle.objects();
        let resolve = |terms: &[WeightedAffinityTerm]| {
            terms
                .iter()
                .map(|t| (i64::from(t.weight), ResolvedTerm::resolve(&t.term, objects)))
                .collect::<Vec<_>>()
        };
        let preferred = resolve(&pod.preferred_affinity_terms);
        let preferred_anti = resolve(&pod.preferred_anti_affinity_terms);
        let namespace_labels = objects.namespace_labels(&pod.namespace);
        let weigher = NodeWeigher {
            pod,
            has_preferred,
            preferred: &preferred,
            preferred_anti: &preferred_anti,
            namespace_labels: &namespace_labels,
            hard_weight: i64::from(self.args.hard_pod_affinity_weight),
        };
        let key = ScoreKey {
            has_preferred,
            preferred: preferred.clone(),
            preferred_anti: preferred_anti.clone(),
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            namespace_labels: namespace_labels.clone(),
        };
        // Per-node sums are kept across cycles (see `NodeTally`): only nodes that changed
        // since the last pod with the same key are read again.
        let topology_score = self.tallies.score.with(key, |tally| {
            tally.refresh(
                snapshot.list(),
                self.handle.parallelizer(),
                |info| weigher.weigh(info),
                merge_node_weights,
            );
            tally.total().clone()
        });
        if topology_score.is_empty() {
            return Status::skip();
        }
        state.write(PreScoreState { topology_score });
        Status::success()
    }
}

fn missing_state() -> Status {
    Status::missing_state(crate::NAME, "PreScore")
}

impl ScorePlugin for InterPodAffinity {
    fn score(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = state.read::<PreScoreState>().ok_or_else(missing_state)?;
        let n = node.node().ok_or_else(|| Status::error("node not found"))?;
        Ok(s.topology_score.score_for(&n.labels))
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    fn normalize_score(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        let Some(s) = state.read::<PreScoreState>() else {
            return missing_state();
        };
        if s.topology_score.is_empty() {
            return Status::success();
        }
        let (Some(&min), Some(&max)) = (scores.iter().min(), scores.iter().max()) else {
            return Status::success();
        };
        let diff = max - min;
        for score in scores.iter_mut() {
            *score = if diff > 0 {
                // Truncation towards zero, as upstream's float-to-int conversion.
                (MAX_NODE_SCORE as f64 * ((*score - min) as f64 / diff as f64)) as i64
            } else {
                0
            };
        }
        Status::success()
    }
}
