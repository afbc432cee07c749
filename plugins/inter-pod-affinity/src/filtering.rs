//! PreFilter (with AddPod/RemovePod) and Filter.

use std::sync::Arc;

use kubesched_framework::model::{Labels, NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, FilterPlugin, PreFilterExtensions, PreFilterPlugin, PreFilterResult, Remedy, Status,
};

use crate::topology::{PairCounts, ResolvedTerm, matches_all};
use crate::{
    ERR_REASON_AFFINITY, ERR_REASON_ANTI_AFFINITY, ERR_REASON_EXISTING_ANTI_AFFINITY,
    InterPodAffinity,
};

/// The incoming pod's required terms, resolved once per cycle.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) affinity: Vec<ResolvedTerm>,
    pub(crate) anti_affinity: Vec<ResolvedTerm>,
    /// Labels of the incoming pod's namespace (existing pods' namespace selectors read them).
    pub(crate) namespace_labels: Labels,
    /// The pod matches all of its own affinity terms (the first-pod-of-a-group exception).
    pub(crate) matches_own_affinity: bool,
}

/// What PreFilter computed for Filter: counts per topology pair.
#[derive(Debug, Clone)]
pub(crate) struct PreFilterState {
    /// Existing pods whose required anti-affinity terms match the incoming pod.
    /// (The counts are shared with PreFilter's tally until AddPod/RemovePod change them.)
    pub(crate) existing_anti_affinity: Arc<PairCounts>,
    /// Existing pods that match all of the incoming pod's affinity terms (per term).
    pub(crate) affinity: Arc<PairCounts>,
    /// Existing pods that match each of the incoming pod's anti-affinity terms.
    pub(crate) anti_affinity: Arc<PairCounts>,
    pub(crate) incoming: Arc<Incoming>,
}

impl PreFilterState {
    /// Counts `other`, now on (or gone from) a node with these labels, with `delta` ±1.
    fn update_with_pod(&mut self, pod: &PodInfo, other: &PodInfo, labels: &Labels, delta: i64) {
        let incoming = Arc::clone(&self.incoming);
        for t in &other.required_anti_affinity_terms {
            if t.matches(&pod.namespace, &incoming.namespace_labels, &pod.labels) {
                Arc::make_mut(&mut self.existing_anti_affinity).add_on_node(
                    labels,
                    &t.topology_key,
                    delta,
                );
            }
        }
        if matches_all(&incoming.affinity, other) {
            for t in &incoming.affinity {
                Arc::make_mut(&mut self.affinity).add_on_node(labels, &t.topology_key, delta);
            }
        }
        for t in &incoming.anti_affinity {
            if t.matches(other) {
                Arc::make_mut(&mut self.anti_affinity).add_on_node(labels, &t.topology_key, delta);
            }
        }
    }

    fn satisfies_affinity(&self, labels: &Labels) -> bool {
        let mut pods_exist = true;
        for t in &self.incoming.affinity {
            let Some(value) = labels.get(&t.topology_key) else {
                // Every topology key of the terms must be on the node.
                return false;
            };
            if self.affinity.get(&t.topology_key, value) <= 0 {
                pods_exist = false;
            }
        }
        // The first pod of a group that is affine to itself: when no pod anywhere matches
        // the terms and the pod matches them itself, any node with the keys will do.
        pods_exist || (self.affinity.is_empty() && self.incoming.matches_own_affinity)
    }

    fn satisfies_anti_affinity(&self, labels: &Labels) -> bool {
        if self.anti_affinity.is_empty() {
            return true;
        }
        !self.incoming.anti_affinity.iter().any(|t| {
            labels
                .get(&t.topology_key)
                .is_some_and(|v| self.anti_affinity.get(&t.topology_key, v) > 0)
        })
    }

    fn satisfies_existing_anti_affinity(&self, labels: &Labels) -> bool {
        self.existing_anti_affinity.is_empty()
            || !self.existing_anti_affinity.any_positive_on_node(labels)
    }
}

/// What existing pods' required anti-affinity terms are matched against: the incoming
/// pod's namespace, its labels and its namespace's labels (the key of a kept tally).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExistingKey {
    namespace: String,
    labels: Labels,
    namespace_labels: Labels,
}

/// The incoming pod's resolved required terms (the key of a kept tally).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IncomingKey {
    affinity: Vec<ResolvedTerm>,
    anti_affinity: Vec<ResolvedTerm>,
}

/// Per node: topology keys of the existing pods' anti-affinity terms that match the
/// incoming pod, one entry per matching term.
pub(crate) type ExistingOnNode = Vec<String>;

/// Per node: pods matching all the incoming affinity terms, and pods matching each
/// anti-affinity term (empty when none does).
pub(crate) type IncomingOnNode = Option<(i64, Vec<i64>)>;

/// Counts of [`IncomingOnNode`] summed per topology pair: (affinity, anti-affinity).
/// Shared so that a cycle takes them without a copy; the tally copies on write.
pub(crate) type IncomingTotals = (Arc<PairCounts>, Arc<PairCounts>);

impl InterPodAffinity {
    /// Pairs where existing pods' required anti-affinity terms match the incoming pod.
    /// Only nodes that changed since the last pod with the same labels and namespace are
    /// visited (see `NodeTally`); nothing at all when no pod has such terms.
    fn existing_anti_affinity_counts(
        &self,
        pod: &PodInfo,
        namespace_labels: &Labels,
    ) -> Arc<PairCounts> {
        let snapshot = self.handle.snapshot();
        if snapshot.have_pods_with_required_anti_affinity().is_empty() {
            return Arc::default();
        }
        let key = ExistingKey {
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            namespace_labels: namespace_labels.clone(),
        };
        self.tallies.existing.with(key, |tally| {
            tally.refresh(
                snapshot.list(),
                self.handle.parallelizer(),
                |info| {
                    let mut keys = Vec::new();
                    for existing in &info.pods_with_required_anti_affinity {
                        for t in &existing.required_anti_affinity_terms {
                            if t.matches(&pod.namespace, namespace_labels, &pod.labels) {
                                keys.push(t.topology_key.clone());
                            }
                        }
                    }
                    keys
                },
                |counts, info, keys, sign| {
                    // Most nodes contribute nothing: leave the shared counts uncopied.
                    if keys.is_empty() {
                        return;
                    }
                    if let Some(node) = info.node() {
                        let counts = Arc::make_mut(counts);
                        for key in keys {
                            counts.add_on_node(&node.labels, key, sign);
                        }
                    }
                },
            );
            tally.total().clone()
        })
    }

    /// Pairs where existing pods match the incoming pod's affinity (all terms) and
    /// anti-affinity (each term). Every pod of every node is visited the first time a
    /// pod with these terms comes; after that only nodes that changed.
    fn incoming_counts(&self, incoming: &Incoming, nodes: &[Arc<NodeInfo>]) -> IncomingTotals {
        if incoming.affinity.is_empty() && incoming.anti_affinity.is_empty() {
            return IncomingTotals::default();
        }
        let key = IncomingKey {
            affinity: incoming.affinity.clone(),
            anti_affinity: incoming.anti_affinity.clone(),
        };
        self.tallies.incoming.with(key, |tally| {
            tally.refresh(
                nodes,
                self.handle.parallelizer(),
                |info| {
                    let mut affine = 0i64;
                    let mut anti: Vec<i64> = Vec::new();
                    for existing in &info.pods {
                        if matches_all(&incoming.affinity, existing) {
                            affine += 1;
                        }
                        for (k, t) in incoming.anti_affinity.iter().enumerate() {
                            if t.matches(existing) {
                                if anti.is_empty() {
                                    anti.resize(incoming.anti_affinity.len(), 0);
                                }
                                anti[k] += 1;
                            }
                        }
                    }
                    (affine > 0 || !anti.is_empty()).then_some((affine, anti))
                },
                |(affinity, anti_affinity), info, on_node, sign| {
                    let (Some(node), Some((affine, anti))) = (info.node(), on_node) else {
                        return;
                    };
                    let labels: &Labels = &node.labels;
                    if *affine > 0 {
                        let affinity = Arc::make_mut(affinity);
                        for t in &incoming.affinity {
                            affinity.add_on_node(labels, &t.topology_key, sign * affine);
                        }
                    }
                    if !anti.is_empty() {
                        let anti_affinity = Arc::make_mut(anti_affinity);
                        for (t, n) in incoming.anti_affinity.iter().zip(anti) {
                            anti_affinity.add_on_node(labels, &t.topology_key, sign * n);
                        }
                    }
                },
            );
            tally.total().clone()
        })
    }
}

fn missing_state() -> Status {
    Status::missing_state(crate::NAME, "PreFilter")
}

impl PreFilterPlugin for InterPodAffinity {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let objects = self.handle.objects();
        let namespace_labels = objects.namespace_labels(&pod.namespace);
        let existing_anti_affinity = self.existing_anti_affinity_counts(pod, &namespace_labels);
        if existing_anti_affinity.is_empty()
            && pod.required_affinity_terms.is_empty()
            && pod.required_anti_affinity_terms.is_empty()
        {
            return (None, Status::skip());
        }
        let resolve = |terms: &[kubesched_framework::model::AffinityTerm]| {
            terms
                .iter()
                .map(|t| ResolvedTerm::resolve(t, objects))
                .collect::<Vec<_>>()
        };
        let affinity = resolve(&pod.required_affinity_terms);
        let matches_own_affinity = matches_all(&affinity, pod);
        let incoming = Incoming {
            affinity,
            anti_affinity: resolve(&pod.required_anti_affinity_terms),
            namespace_labels,
            matches_own_affinity,
        };
        let (affinity, anti_affinity) = self.incoming_counts(&incoming, nodes);
        state.write(PreFilterState {
            existing_anti_affinity,
            affinity,
            anti_affinity,
            incoming: Arc::new(incoming),
        });
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

impl PreFilterExtensions for InterPodAffinity {
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
        if let Some(n) = node.node() {
            s.update_with_pod(pod_to_schedule, pod_to_add, &n.labels, 1);
        }
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
        if let Some(n) = node.node() {
            s.update_with_pod(pod_to_schedule, pod_to_remove, &n.labels, -1);
        }
        Status::success()
    }
}

impl FilterPlugin for InterPodAffinity {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return missing_state();
        };
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        if !s.satisfies_affinity(&n.labels) {
            return Status::unresolvable(ERR_REASON_AFFINITY);
        }
        if !s.satisfies_anti_affinity(&n.labels) {
            return Status::unschedulable(ERR_REASON_ANTI_AFFINITY);
        }
        if !s.satisfies_existing_anti_affinity(&n.labels) {
            return Status::unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY);
        }
        Status::success()
    }

    /// Every term standing in the way on this node, from the same counts Filter reads.
    fn remedies(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Vec<Remedy> {
        let (Some(s), Some(n)) = (state.read::<PreFilterState>(), node.node()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if !s.satisfies_affinity(&n.labels) {
            for t in &s.incoming.affinity {
                match n.labels.get(&t.topology_key) {
                    None => out.push(Remedy::MissingTopologyLabel {
                        topology_key: t.topology_key.clone(),
                    }),
                    Some(value) if s.affinity.get(&t.topology_key, value) <= 0 => {
                        out.push(Remedy::PodAffinity {
                            topology_key: t.topology_key.clone(),
                            value: value.clone(),
                        })
                    }
                    Some(_) => {}
                }
            }
        }
        for t in &s.incoming.anti_affinity {
            if let Some(value) = n.labels.get(&t.topology_key) {
                let matching_pods = s.anti_affinity.get(&t.topology_key, value);
                if matching_pods > 0 {
                    out.push(Remedy::PodAntiAffinity {
                        topology_key: t.topology_key.clone(),
                        value: value.clone(),
                        matching_pods,
                    });
                }
            }
        }
        for (topology_key, value, _) in s.existing_anti_affinity.positive_on_node(&n.labels) {
            out.push(Remedy::ExistingAntiAffinity {
                topology_key,
                value,
            });
        }
        out
    }
}
