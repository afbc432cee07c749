//! PreFilter (with AddPod/RemovePod) and Filter: hard (DoNotSchedule) constraints.

use std::collections::HashMap;
use std::sync::Arc;

use kubesched_framework::model::{NodeInfo, PodInfo, WhenUnsatisfiable};
use kubesched_framework::{
    CycleState, FilterPlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult, Status,
};

use crate::common::{Constraint, count_matching, has_all_keys};
use crate::{ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH, PodTopologySpread};

/// The global minimum when no domain is eligible: large enough that every node passes.
const NO_DOMAIN_MIN: i64 = i32::MAX as i64;

/// One constraint's domains: matching pods per domain value, and the global minimum kept
/// exact under ±1 updates by a histogram of how many domains hold each count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Domains {
    pub(crate) counts: HashMap<String, i64>,
    at_count: HashMap<i64, i64>,
    pub(crate) min: i64,
}

impl Domains {
    pub(crate) fn new(counts: HashMap<String, i64>) -> Self {
        let mut at_count: HashMap<i64, i64> = HashMap::new();
        let mut min = NO_DOMAIN_MIN;
        for &n in counts.values() {
            *at_count.entry(n).or_insert(0) += 1;
            min = min.min(n);
        }
        Self {
            counts,
            at_count,
            min,
        }
    }

    /// The minimum to compute skew against: 0 while fewer domains than `min_domains` exist.
    pub(crate) fn min_match(&self, min_domains: i32) -> i64 {
        if (self.counts.len() as i64) < i64::from(min_domains) {
            0
        } else {
            self.min
        }
    }

    /// Moves one domain by `delta` (±1, one pod at a time) and keeps the minimum exact
    /// without scanning the domains.
    pub(crate) fn update(&mut self, value: &str, delta: i64) {
        let Some(n) = self.counts.get_mut(value) else {
            // A domain PreFilter did not see (a node outside the snapshot): a new member.
            self.counts.insert(value.to_string(), delta);
            *self.at_count.entry(delta).or_insert(0) += 1;
            self.min = self.min.min(delta);
            return;
        };
        let old = *n;
        let cur = old + delta;
        *n = cur;
        if let Some(k) = self.at_count.get_mut(&old) {
            *k -= 1;
            if *k <= 0 {
                self.at_count.remove(&old);
            }
        }
        *self.at_count.entry(cur).or_insert(0) += 1;
        if cur < self.min {
            self.min = cur;
        } else if old == self.min && !self.at_count.contains_key(&old) {
            // The last domain at the minimum went up by one: every other domain was
            // already at or above old + 1, so that is the new minimum.
            self.min = cur;
        }
    }
}

/// What PreFilter computed for Filter.
#[derive(Debug, Clone)]
pub(crate) struct PreFilterState {
    pub(crate) constraints: Arc<Vec<Constraint>>,
    /// Aligned with `constraints`.
    pub(crate) domains: Vec<Domains>,
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
                self.domains[k].update(value, delta);
            }
        }
    }
}

fn missing_state() -> Status {
    Status::error(format!(
        "reading the PreFilter state of {} from the cycle state: PreFilter did not run",
        crate::NAME
    ))
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
        // Per node: (constraint, domain value, matching pods) for every constraint whose
        // policies include the node.
        let per_node = self.inner.handle.parallelizer().map(nodes.len(), |i| {
            let info = &nodes[i];
            let node = info.node()?;
            if !has_all_keys(&node.labels, &constraints) {
                return None;
            }
            let mut out: Vec<(usize, &str, i64)> = Vec::with_capacity(constraints.len());
            for (k, c) in constraints.iter().enumerate() {
                if !c.includes_node(pod, node) {
                    continue;
                }
                if let Some(value) = node.labels.get(&c.topology_key) {
                    out.push((
                        k,
                        value,
                        count_matching(&info.pods, &c.selector, &pod.namespace),
                    ));
                }
            }
            Some(out)
        });
        let mut counts: Vec<HashMap<String, i64>> = vec![HashMap::new(); constraints.len()];
        for (k, value, n) in per_node.into_iter().flatten().flatten() {
            match counts[k].get_mut(value) {
                Some(c) => *c += n,
                None => {
                    counts[k].insert(value.to_string(), n);
                }
            }
        }
        state.write(PreFilterState {
            constraints: Arc::new(constraints),
            domains: counts.into_iter().map(Domains::new).collect(),
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
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return missing_state();
        };
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        for (c, domains) in s.constraints.iter().zip(&s.domains) {
            let Some(value) = n.labels.get(&c.topology_key) else {
                return Status::unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH);
            };
            // existing matching pods + the pod itself if it matches - global minimum.
            let self_match = i64::from(c.selector.matches(&pod.labels));
            let matching = domains.counts.get(value.as_str()).copied().unwrap_or(0);
            let skew = matching + self_match - domains.min_match(c.min_domains);
            if skew > i64::from(c.max_skew) {
                return Status::unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH);
            }
        }
        Status::success()
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
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        );
        assert_eq!(d.min, 0);
        // A small deterministic generator: no dependency, reproducible steps.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = ["a", "b", "c", "d"][(x % 4) as usize];
            let delta = if (x >> 8).is_multiple_of(2) || d.counts[key] == 0 {
                1
            } else {
                -1
            };
            d.update(key, delta);
            let scanned = d.counts.values().copied().min().unwrap_or(NO_DOMAIN_MIN);
            assert_eq!(d.min, scanned);
        }
        let mut empty = Domains::new(HashMap::new());
        assert_eq!(empty.min, NO_DOMAIN_MIN);
        assert_eq!(empty.min_match(1), 0);
        empty.update("z", 1);
        assert_eq!((empty.min, empty.counts.len()), (1, 1));
    }

    #[test]
    fn min_domains_zeroes_the_minimum_until_reached() {
        let d = Domains::new(
            [("a".to_string(), 2), ("b".to_string(), 3)]
                .into_iter()
                .collect(),
        );
        assert_eq!(d.min_match(1), 2);
        assert_eq!(d.min_match(2), 2);
        assert_eq!(d.min_match(3), 0);
    }
}
