//! PreFilter (with AddPod/RemovePod) and Filter: hard (DoNotSchedule) constraints.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use kubesched_framework::model::{NodeInfo, PodInfo, WhenUnsatisfiable};
use kubesched_framework::{
    CycleState, FilterPlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult, Remedy, Status,
};
use rustc_hash::FxHashMap;

use crate::common::{Constraint, CountKey, NodeCounts, has_all_keys, node_counts};
use crate::{ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH, PodTopologySpread};

/// The global minimum when no domain is eligible: large enough that every node passes.
const NO_DOMAIN_MIN: i64 = i32::MAX as i64;

/// One domain upstream follows for the minimum: its value and matching pods.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CriticalPath {
    /// None until a domain takes the place.
    value: Option<Arc<str>>,
    count: i64,
}

/// Upstream's "critical paths": the two domains with the fewest matching pods as PreFilter
/// saw them, then moved by AddPod/RemovePod (preemption dry runs, nominated pods) with
/// upstream's rule. The first one's count is the minimum Filter uses. Only these two are
/// followed, so once both grow past an untracked domain the minimum is overestimated
/// until a smaller count is seen again: kubesched keeps the same bookkeeping on purpose,
/// so that dry runs and nominated-pod filtering decide as kube-scheduler does (an exact
/// minimum rejects nodes upstream accepts). Ties at PreFilter are broken by the smaller
/// topology value, where upstream takes whichever its map iteration meets first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CriticalPaths([CriticalPath; 2]);

impl CriticalPaths {
    fn empty() -> Self {
        let none = CriticalPath {
            value: None,
            count: NO_DOMAIN_MIN,
        };
        Self([none.clone(), none])
    }

    /// The two smallest domains of `domains`, by count then value.
    fn of(domains: &Domains) -> Self {
        let mut best: [Option<(i64, &Arc<str>)>; 2] = [None, None];
        for (value, &count) in &domains.counts {
            let key = (count, value);
            if best[0].is_none_or(|b| key < b) {
                best[1] = best[0];
                best[0] = Some(key);
            } else if best[1].is_none_or(|b| key < b) {
                best[1] = Some(key);
            }
        }
        let mut paths = Self::empty();
        for (path, found) in paths.0.iter_mut().zip(best) {
            if let Some((count, value)) = found {
                *path = CriticalPath {
                    value: Some(Arc::clone(value)),
                    count,
                };
            }
        }
        paths
    }

    /// Upstream's update: a followed domain takes its new count (the two swap when out
    /// of order); another domain enters only when it is below one of them.
    fn update(&mut self, value: &Arc<str>, count: i64) {
        let p = &mut self.0;
        let followed = p.iter().position(|c| c.value.as_deref() == Some(&**value));
        if let Some(i) = followed {
            p[i].count = count;
            if p[0].count > p[1].count {
                p.swap(0, 1);
            }
        } else if count < p[0].count {
            p[1] = p[0].clone();
            p[0] = CriticalPath {
                value: Some(Arc::clone(value)),
                count,
            };
        } else if count < p[1].count {
            p[1] = CriticalPath {
                value: Some(Arc::clone(value)),
                count,
            };
        }
    }
}

/// One constraint's domains: matching pods per domain value, and the global minimum kept
/// exact under any update by a histogram of how many domains hold each count. Once a dry
/// run moves a copy with [`Domains::update_as_upstream`], the minimum is the one of
/// upstream's [`CriticalPaths`] instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Domains {
    /// Keys are shared, so handing a copy to each cycle copies no strings.
    counts: FxHashMap<Arc<str>, i64>,
    at_count: BTreeMap<i64, u32>,
    min: i64,
    /// Set on a cycle's copy by its first AddPod/RemovePod.
    paths: Option<CriticalPaths>,
}

impl Default for Domains {
    fn default() -> Self {
        Self {
            counts: FxHashMap::default(),
            at_count: BTreeMap::new(),
            min: NO_DOMAIN_MIN,
            paths: None,
        }
    }
}

impl Domains {
    #[cfg(test)]
    pub(crate) fn new(counts: impl IntoIterator<Item = (String, i64)>) -> Self {
        let mut d = Self::default();
        for (value, n) in counts {
            d.add_domain(&value);
            d.update(&value, n);
        }
        d.refresh_min();
        d
    }

    /// The matching pods of a domain (None when it is not a domain).
    pub(crate) fn count(&self, value: &str) -> Option<i64> {
        self.counts.get(value).copied()
    }

    /// Number of domains.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }

    /// The smallest count over the domains (a large number when there is none).
    #[cfg(test)]
    pub(crate) fn min(&self) -> i64 {
        self.min
    }

    /// Every domain with its count, sorted by value.
    #[cfg(test)]
    pub(crate) fn sorted_counts(&self) -> Vec<(String, i64)> {
        let mut all: Vec<(String, i64)> = self
            .counts
            .iter()
            .map(|(v, &n)| (v.to_string(), n))
            .collect();
        all.sort();
        all
    }

    /// The minimum Filter uses: the exact one, or upstream's critical-path one after
    /// AddPod/RemovePod moved this copy.
    fn global_min(&self) -> i64 {
        self.paths.as_ref().map_or(self.min, |p| p.0[0].count)
    }

    /// The minimum to compute skew against: 0 while fewer domains than `min_domains` exist.
    pub(crate) fn min_match(&self, min_domains: i32) -> i64 {
        if (self.counts.len() as i64) < i64::from(min_domains) {
            0
        } else {
            self.global_min()
        }
    }

    /// AddPod/RemovePod's update: the count moves exactly, the minimum as upstream's
    /// critical paths move (see [`CriticalPaths`]). `initial` holds the paths of the
    /// PreFilter counts, found once per cycle and shared by all its copies.
    pub(crate) fn update_as_upstream(
        &mut self,
        value: &str,
        delta: i64,
        initial: &OnceLock<CriticalPaths>,
    ) {
        if self.paths.is_none() {
            let paths = initial.get_or_init(|| CriticalPaths::of(self)).clone();
            self.paths = Some(paths);
        }
        self.update(value, delta);
        if let (Some((value, &count)), Some(paths)) =
            (self.counts.get_key_value(value), self.paths.as_mut())
        {
            paths.update(value, count);
        }
    }

    fn refresh_min(&mut self) {
        self.min = self
            .at_count
            .keys()
            .next()
            .copied()
            .unwrap_or(NO_DOMAIN_MIN);
    }

    fn tally(&mut self, count: i64, by: i32) {
        let slot = self.at_count.entry(count).or_insert(0);
        *slot = slot.saturating_add_signed(by);
        if *slot == 0 {
            self.at_count.remove(&count);
        }
    }

    /// Makes `value` a domain with no matching pod yet (nothing when it is one).
    fn add_domain(&mut self, value: &str) {
        if !self.counts.contains_key(value) {
            self.counts.insert(Arc::from(value), 0);
            self.tally(0, 1);
            self.refresh_min();
        }
    }

    /// Drops the domain `value` with whatever it counts.
    fn remove_domain(&mut self, value: &str) {
        if let Some(n) = self.counts.remove(value) {
            self.tally(n, -1);
            self.refresh_min();
        }
    }

    /// Moves one domain by `delta`, keeping the minimum exact. A value that is not a
    /// domain yet (a node outside the snapshot, seen by AddPod) becomes one.
    pub(crate) fn update(&mut self, value: &str, delta: i64) {
        if delta == 0 {
            return;
        }
        match self.counts.get_mut(value) {
            Some(n) => {
                let old = *n;
                *n += delta;
                let new = *n;
                self.tally(old, -1);
                self.tally(new, 1);
            }
            None => {
                self.counts.insert(Arc::from(value), delta);
                self.tally(delta, 1);
            }
        }
        self.refresh_min();
    }
}

/// One constraint's domains as PreFilter's tally keeps them across cycles: how many
/// eligible nodes make each value a domain, and the domains themselves.
#[derive(Debug, Default)]
pub(crate) struct DomainTally {
    nodes_per_value: FxHashMap<Arc<str>, i64>,
    /// Shared with the cycles that took it; copied on write.
    domains: Arc<Domains>,
}

/// Adds (`sign` 1) or takes out (-1) one node's counts.
fn fold_node(
    totals: &mut Vec<DomainTally>,
    constraints: &[Constraint],
    info: &NodeInfo,
    counts: &NodeCounts,
    sign: i64,
) {
    let Some(node) = info.node() else {
        return;
    };
    if totals.len() < constraints.len() {
        totals.resize_with(constraints.len(), DomainTally::default);
    }
    let Some(counts) = counts.per_constraint() else {
        return;
    };
    for ((c, n), t) in constraints.iter().zip(counts).zip(totals.iter_mut()) {
        let (Some(n), Some(value)) = (n.map(i64::from), node.labels.get(&c.topology_key)) else {
            continue;
        };
        let value = value.as_str();
        let domains = Arc::make_mut(&mut t.domains);
        if sign > 0 {
            match t.nodes_per_value.get_mut(value) {
                Some(k) => *k += 1,
                None => {
                    t.nodes_per_value.insert(Arc::from(value), 1);
                    domains.add_domain(value);
                }
            }
            domains.update(value, n);
        } else {
            domains.update(value, -n);
            if let Some(k) = t.nodes_per_value.get_mut(value) {
                *k -= 1;
                if *k <= 0 {
                    t.nodes_per_value.remove(value);
                    domains.remove_domain(value);
                }
            }
        }
    }
}

/// What PreFilter computed for Filter.
#[derive(Debug, Clone)]
pub(crate) struct PreFilterState {
    pub(crate) constraints: Arc<Vec<Constraint>>,
    /// Aligned with `constraints`.
    pub(crate) domains: Vec<Arc<Domains>>,
    /// Whether the incoming pod matches each constraint's selector (1) or not (0).
    self_match: Arc<[i64]>,
    /// Upstream's critical paths of PreFilter's counts, aligned with `constraints`: found
    /// by the first AddPod/RemovePod of the cycle, shared by every copy of the state.
    initial_paths: Arc<[OnceLock<CriticalPaths>]>,
}

impl PreFilterState {
    fn update_with_pod(
        &mut self,
        updated: &PodInfo,
        preemptor: &PodInfo,
        node: &NodeInfo,
        delta: i64,
    ) {
        if updated.namespace != preemptor.namespace {
            return;
        }
        let Some(n) = node.node() else {
            return;
        };
        if !has_all_keys(&n.labels, &self.constraints) {
            return;
        }
        let constraints = Arc::clone(&self.constraints);
        for (k, c) in constraints.iter().enumerate() {
            if !c.selector.matches(&updated.labels) || !c.includes_node(preemptor, n) {
                continue;
            }
            if let Some(value) = n.labels.get(&c.topology_key) {
                Arc::make_mut(&mut self.domains[k]).update_as_upstream(
                    value,
                    delta,
                    &self.initial_paths[k],
                );
            }
        }
    }
}

fn missing_state() -> Status {
    Status::missing_state(crate::NAME, "PreFilter")
}

impl PreFilterPlugin for PodTopologySpread {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let constraints = self.constraints(pod, WhenUnsatisfiable::DoNotSchedule);
        if constraints.is_empty() {
            return (None, Status::skip());
        }
        // Counts per node are kept across cycles and recomputed only for nodes that
        // changed since the last pod with the same constraints (see `NodeTally`).
        let key = CountKey::new(pod, &constraints, true);
        let parallelizer = self.inner.handle.parallelizer();
        let domains = self.inner.filter_tallies.with(key, |tally| {
            tally.refresh(
                nodes,
                parallelizer,
                |info| node_counts(pod, &constraints, info, true, false),
                |totals, info, counts, sign| {
                    fold_node(totals, &constraints, info, counts, sign);
                },
            );
            let totals = tally.total();
            (0..constraints.len())
                .map(|k| {
                    totals
                        .get(k)
                        .map_or_else(Arc::default, |t| Arc::clone(&t.domains))
                })
                .collect()
        });
        let initial_paths = (0..constraints.len()).map(|_| OnceLock::new()).collect();
        let self_match = constraints
            .iter()
            .map(|c| i64::from(c.selector.matches(&pod.labels)))
            .collect();
        state.write(PreFilterState {
            constraints: Arc::new(constraints),
            domains,
            self_match,
            initial_paths,
        });
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for PodTopologySpread {
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>() else {
            return missing_state();
        };
        s.update_with_pod(pod_to_add, pod_to_schedule, node, 1);
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>() else {
            return missing_state();
        };
        s.update_with_pod(pod_to_remove, pod_to_schedule, node, -1);
        Status::success()
    }
}

impl FilterPlugin for PodTopologySpread {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return missing_state();
        };
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        for ((c, domains), &self_match) in s.constraints.iter().zip(&s.domains).zip(&*s.self_match)
        {
            let Some(value) = n.labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            // existing matching pods + the pod itself if it matches - global minimum.
            let matching = domains.count(value).unwrap_or(0);
            let skew = matching + self_match - domains.min_match(c.min_domains);
            if skew > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
    }

    /// Every hard constraint the node breaks, with the same arithmetic as Filter.
    fn remedies(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Vec<Remedy> {
        let (Some(s), Some(n)) = (state.read::<PreFilterState>(), node.node()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (c, domains) in s.constraints.iter().zip(&s.domains) {
            let Some(value) = n.labels.get(&c.topology_key) else {
                out.push(Remedy::MissingTopologyLabel {
                    topology_key: c.topology_key.to_string(),
                });
                continue;
            };
            let self_match = i64::from(c.selector.matches(&pod.labels));
            let matching = domains.count(value).unwrap_or(0);
            let skew = matching + self_match - domains.min_match(c.min_domains);
            if skew > i64::from(c.max_skew) {
                out.push(Remedy::SpreadSkew {
                    topology_key: c.topology_key.to_string(),
                    value: value.clone(),
                    skew,
                    max_skew: c.max_skew,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The histogram keeps the minimum equal to a full scan under any ±1 walk.
    #[test]
    fn minimum_stays_exact_under_single_steps() {
        let mut d = Domains::new(
            [("a", 3), ("b", 1), ("c", 1), ("d", 0)]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v)),
        );
        assert_eq!(d.min(), 0);
        // A small deterministic generator: no dependency, reproducible steps.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = ["a", "b", "c", "d"][(x % 4) as usize];
            let delta = if (x >> 8).is_multiple_of(2) || d.count(key) == Some(0) {
                1
            } else {
                -1
            };
            let delta = if (x >> 20).is_multiple_of(5) {
                delta * 3
            } else {
                delta
            };
            d.update(key, delta);
            let scanned = d.counts.values().copied().min().unwrap_or(NO_DOMAIN_MIN);
            assert_eq!(d.min(), scanned);
        }
        let mut empty = Domains::new([]);
        assert_eq!(empty.min(), NO_DOMAIN_MIN);
        assert_eq!(empty.min_match(1), 0);
        empty.update("z", 1);
        assert_eq!((empty.min(), empty.len()), (1, 1));
        empty.remove_domain("z");
        assert_eq!((empty.min(), empty.len()), (NO_DOMAIN_MIN, 0));
    }

    #[test]
    fn min_domains_zeroes_the_minimum_until_reached() {
        let d = Domains::new([("a".to_string(), 2), ("b".to_string(), 3)]);
        assert_eq!(d.min_match(1), 2);
        assert_eq!(d.min_match(2), 2);
        assert_eq!(d.min_match(3), 0);
    }
}
