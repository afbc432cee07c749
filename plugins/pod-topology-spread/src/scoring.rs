//! PreScore, Score and NormalizeScore: soft (ScheduleAnyway) constraints.

use std::sync::Arc;

use kubesched_framework::model::{NodeInfo, PodInfo, WhenUnsatisfiable};
use kubesched_framework::{CycleState, MAX_NODE_SCORE, PreScorePlugin, ScorePlugin, Status};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::PodTopologySpread;
use crate::common::{Constraint, CountKey, HOSTNAME, NodeCounts, node_counts};
use crate::node_values::{KeyValues, ValuesView};

/// What PreScore computed for Score; shared, never changed after PreScore.
#[derive(Debug)]
pub(crate) struct ScoreData {
    pub(crate) constraints: Vec<Constraint>,
    /// Candidate nodes lacking some topology key, by generation (unique to one version
    /// of one node): they score 0.
    pub(crate) ignored: FxHashSet<u64>,
    /// Per constraint: matching pods per domain value (not for hostname constraints,
    /// which Score counts on the node itself).
    pub(crate) counts: Vec<FxHashMap<Arc<str>, i64>>,
    /// Per constraint: ln(number of domains + 2), so small topologies are not drowned.
    pub(crate) weights: Vec<f64>,
    /// Per constraint: each node's value of its key.
    values: Vec<ValuesView>,
}

/// The cycle-state entry.
#[derive(Debug, Clone)]
pub(crate) struct PreScoreState(pub(crate) Arc<ScoreData>);

fn topology_normalizing_weight(size: usize) -> f64 {
    ((size + 2) as f64).ln()
}

/// A domain's contribution: its count weighted, plus maxSkew − 1 so that skews within
/// the tolerance weigh less.
fn score_for_count(count: i64, max_skew: i32, weight: f64) -> f64 {
    count as f64 * weight + f64::from(max_skew - 1)
}

/// Per constraint: matching pods per domain value summed over the tally's nodes, and
/// every node's value of the constraint's key.
pub(crate) type ValueTotals = Vec<(FxHashMap<Arc<str>, i64>, KeyValues)>;

/// Adds (`sign` 1) or takes out (-1) one node's counts.
fn fold_node(
    totals: &mut ValueTotals,
    constraints: &[Constraint],
    info: &NodeInfo,
    counts: &NodeCounts,
    sign: i64,
) {
    let Some(node) = info.node() else {
        return;
    };
    if totals.len() < constraints.len() {
        totals.resize_with(constraints.len(), Default::default);
    }
    // Every node's value, counted or not: PreScore and Score read it for any candidate.
    for (c, (_, values)) in constraints.iter().zip(totals.iter_mut()) {
        values.fold(info, &c.topology_key, sign);
    }
    let Some(counts) = counts.per_constraint() else {
        return;
    };
    for ((c, n), (total, _)) in constraints.iter().zip(counts).zip(totals.iter_mut()) {
        let Some(n) = n.map(i64::from).filter(|n| *n != 0) else {
            continue;
        };
        let value = node.labels.get(&c.topology_key).map_or("", String::as_str);
        let now = match total.get_mut(value) {
            Some(t) => {
                *t += sign * n;
                *t
            }
            None => {
                total.insert(Arc::from(value), sign * n);
                sign * n
            }
        };
        if now == 0 {
            total.remove(value);
        }
    }
}

fn missing_state() -> Status {
    Status::missing_state(crate::NAME, "PreScore")
}

impl PreScorePlugin for PodTopologySpread {
    fn pre_score(&self, state: &mut CycleState, pod: &PodInfo, nodes: &[Arc<NodeInfo>]) -> Status {
        let snapshot = self.inner.handle.snapshot();
        let all = snapshot.list();
        if all.is_empty() {
            return Status::skip();
        }
        let constraints = self.constraints(pod, WhenUnsatisfiable::ScheduleAnyway);
        if constraints.is_empty() {
            return Status::skip();
        }
        // System defaults spread over hostnames even on nodes that have no zone label;
        // any other constraints need every key on a node.
        let require_all =
            !pod.topology_spread_constraints.is_empty() || !self.inner.system_defaulted;

        // Count matching pods of every node of the cluster into the candidates' domains.
        // The per-node counts are kept across cycles (see `NodeTally`); only nodes that
        // changed since the last pod with the same constraints are read again.
        let key = CountKey::new(pod, &constraints, require_all);
        let parallelizer = self.inner.handle.parallelizer();
        let mut ignored = FxHashSet::default();
        let mut counts: Vec<FxHashMap<Arc<str>, i64>> =
            vec![FxHashMap::default(); constraints.len()];
        let values: Vec<ValuesView> = self.inner.score_tallies.with(key, |tally| {
            tally.refresh(
                all,
                parallelizer,
                |info| node_counts(pod, &constraints, info, require_all, true),
                |totals, info, counts, sign| {
                    fold_node(totals, &constraints, info, counts, sign);
                },
            );
            let totals = tally.total();
            let values: Vec<ValuesView> = (0..constraints.len())
                .map(|k| {
                    totals
                        .get(k)
                        .map_or_else(ValuesView::default, |t| t.1.view())
                })
                .collect();
            // The candidates' domains, with the matching pods of the whole cluster.
            let mut node_values: Vec<Option<&str>> = Vec::with_capacity(constraints.len());
            for info in nodes {
                let Some(node) = info.node() else { continue };
                node_values.clear();
                node_values.extend(
                    constraints
                        .iter()
                        .zip(&values)
                        .map(|(c, v)| v.get(info, node, &c.topology_key)),
                );
                if require_all && node_values.iter().any(Option::is_none) {
                    ignored.insert(info.generation);
                    continue;
                }
                for (k, (c, value)) in constraints.iter().zip(&node_values).enumerate() {
                    if c.topology_key == HOSTNAME {
                        continue;
                    }
                    let value = value.unwrap_or("");
                    if !counts[k].contains_key(value) {
                        let n = totals.get(k).and_then(|(t, _)| t.get(value)).copied();
                        counts[k].insert(Arc::from(value), n.unwrap_or(0));
                    }
                }
            }
            values
        });
        let weights = constraints
            .iter()
            .zip(&counts)
            .map(|(c, domains)| {
                let size = if c.topology_key == HOSTNAME {
                    nodes.len().saturating_sub(ignored.len())
                } else {
                    domains.len()
                };
                topology_normalizing_weight(size)
            })
            .collect();

        state.write(PreScoreState(Arc::new(ScoreData {
            constraints,
            ignored,
            counts,
            weights,
            values,
        })));
        Status::success()
    }
}

impl ScorePlugin for PodTopologySpread {
    fn score(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Result<i64, Status> {
        let s = &state.read::<PreScoreState>().ok_or_else(missing_state)?.0;
        let n = node.node().ok_or_else(|| Status::error("node not found"))?;
        if !s.ignored.is_empty() && s.ignored.contains(&node.generation) {
            return Ok(0);
        }
        let mut score = 0.0;
        for (k, (c, values)) in s.constraints.iter().zip(&s.values).enumerate() {
            let Some(value) = values.get(node, n, &c.topology_key) else {
                continue;
            };
            let count = if c.topology_key == HOSTNAME {
                node.count_matching_pods(&pod.namespace, &c.selector)
            } else {
                s.counts[k].get(value).copied().unwrap_or(0)
            };
            score += score_for_count(count, c.max_skew, s.weights[k]);
        }
        Ok(score.round() as i64)
    }

    fn has_normalize_score(&self) -> bool {
        true
    }

    /// Reverses the scores: the node with the fewest matching pods gets 100; ignored
    /// nodes get 0.
    fn normalize_score(
        &self,
        state: &CycleState,
        _pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
        scores: &mut [i64],
    ) -> Status {
        let Some(PreScoreState(s)) = state.read::<PreScoreState>() else {
            return missing_state();
        };
        let ignored = |i: usize| {
            !s.ignored.is_empty()
                && nodes
                    .get(i)
                    .is_some_and(|n| s.ignored.contains(&n.generation))
        };
        let mut min = i64::MAX;
        let mut max = 0;
        for (i, &score) in scores.iter().enumerate() {
            if ignored(i) {
                continue;
            }
            min = min.min(score);
            max = max.max(score);
        }
        for (i, score) in scores.iter_mut().enumerate() {
            *score = if ignored(i) {
                0
            } else if max == 0 {
                MAX_NODE_SCORE
            } else {
                MAX_NODE_SCORE * (max + min - *score) / max
            };
        }
        Status::success()
    }
}
