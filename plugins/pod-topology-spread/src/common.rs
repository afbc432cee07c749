//! What PreFilter and PreScore share: the pod's effective constraints, system or listed
//! defaults with the selector deduced from the pod's Services and controller, and counting.

use kubesched_framework::ObjectStore;
use kubesched_framework::model::{
    InclusionPolicy, LabelSelector, Labels, Node, NodeInfo, PodInfo, RequiredNodeAffinity,
    TaintEffect, Toleration, TopologySpreadConstraint, WhenUnsatisfiable, find_untolerated_with,
};

/// The node label of per-node domains; counts for it are taken per node in Score.
pub(crate) const HOSTNAME: &str = "kubernetes.io/hostname";
/// The zone label.
pub(crate) const ZONE: &str = "topology.kubernetes.io/zone";

/// One constraint as this plugin applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Constraint {
    pub(crate) max_skew: i32,
    pub(crate) topology_key: String,
    pub(crate) selector: LabelSelector,
    /// 1 when the constraint does not set it.
    pub(crate) min_domains: i32,
    pub(crate) node_affinity_policy: InclusionPolicy,
    pub(crate) node_taints_policy: InclusionPolicy,
    /// TaintTolerationComparisonOperators: under `nodeTaintsPolicy: Honor`, `Lt` / `Gt`
    /// tolerations compare as integers (upstream passes the gate here too since v1.35).
    pub(crate) taint_comparisons: bool,
}

impl Constraint {
    fn new(c: &TopologySpreadConstraint, selector: LabelSelector) -> Self {
        Self {
            max_skew: c.max_skew,
            topology_key: c.topology_key.clone(),
            selector,
            min_domains: c.min_domains.unwrap_or(1),
            node_affinity_policy: c.node_affinity_policy,
            node_taints_policy: c.node_taints_policy,
            taint_comparisons: false,
        }
    }

    /// Whether the node counts as a domain member for this pod under the constraint's
    /// node affinity and taint policies.
    pub(crate) fn includes_node(&self, pod: &PodInfo, node: &Node) -> bool {
        if self.node_affinity_policy == InclusionPolicy::Honor
            && !pod.required_node_affinity.matches(&node.labels, &node.name)
        {
            return false;
        }
        if self.node_taints_policy == InclusionPolicy::Honor
            && find_untolerated_with(
                &node.taints,
                &pod.tolerations,
                &[TaintEffect::NoSchedule, TaintEffect::NoExecute],
                self.taint_comparisons,
            )
            .is_some()
        {
            return false;
        }
        true
    }
}

/// Everything a node's counts depend on besides the node: the key of a kept tally.
/// The pod's node affinity and tolerations are part of it only when a constraint's
/// policy reads them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CountKey {
    namespace: String,
    constraints: Vec<Constraint>,
    node_affinity: Option<RequiredNodeAffinity>,
    tolerations: Option<Vec<Toleration>>,
    require_all_keys: bool,
}

impl CountKey {
    pub(crate) fn new(pod: &PodInfo, constraints: &[Constraint], require_all_keys: bool) -> Self {
        let honors = |f: fn(&Constraint) -> InclusionPolicy| {
            constraints.iter().any(|c| f(c) == InclusionPolicy::Honor)
        };
        Self {
            namespace: pod.namespace.clone(),
            constraints: constraints.to_vec(),
            node_affinity: honors(|c| c.node_affinity_policy)
                .then(|| pod.required_node_affinity.clone()),
            tolerations: honors(|c| c.node_taints_policy).then(|| pod.tolerations.clone()),
            require_all_keys,
        }
    }
}

/// Tallies kept per plugin instance; a few keys cover the workloads of a cluster at once.
pub(crate) const TALLY_SLOTS: usize = 8;

/// Whether the node has every constraint's topology key.
pub(crate) fn has_all_keys(labels: &Labels, constraints: &[Constraint]) -> bool {
    constraints
        .iter()
        .all(|c| labels.contains_key(&c.topology_key))
}

/// What a tally remembers of one node: per constraint, the matching pods when the node
/// counts toward that constraint's domains; nothing when the node is left out entirely.
/// A tally keeps one per node for as long as it lives (50,000 at that scale), so a single
/// constraint, the usual case, needs no allocation of its own.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeCounts {
    /// The node is left out entirely.
    Out,
    /// One constraint.
    One(Option<u32>),
    /// Several constraints.
    Many(Box<[Option<u32>]>),
}

impl NodeCounts {
    /// Per constraint, the matching pods when counted; None when the node is left out.
    pub(crate) fn per_constraint(&self) -> Option<&[Option<u32>]> {
        match self {
            Self::Out => None,
            Self::One(n) => Some(std::slice::from_ref(n)),
            Self::Many(all) => Some(all),
        }
    }
}

/// Matching pods on one node per constraint, for the constraints whose policies let the
/// node in. With `require_all_keys` a node lacking any constraint's key is left out;
/// with `skip_hostname` hostname constraints are not counted (Score counts those on the
/// node itself).
pub(crate) fn node_counts(
    pod: &PodInfo,
    constraints: &[Constraint],
    info: &NodeInfo,
    require_all_keys: bool,
    skip_hostname: bool,
) -> NodeCounts {
    let Some(node) = info.node() else {
        return NodeCounts::Out;
    };
    if require_all_keys && !has_all_keys(&node.labels, constraints) {
        return NodeCounts::Out;
    }
    let count = |c: &Constraint| {
        (!(skip_hostname && c.topology_key == HOSTNAME) && c.includes_node(pod, node)).then(|| {
            // A node's pods are far fewer than u32::MAX.
            u32::try_from(info.count_matching_pods(&pod.namespace, &c.selector)).unwrap_or(u32::MAX)
        })
    };
    match constraints {
        [one] => NodeCounts::One(count(one)),
        all => NodeCounts::Many(all.iter().map(count).collect()),
    }
}

/// The selector deduced from the pod's Services and controller (see
/// `ObjectStore::default_selector`).
pub(crate) fn default_selector(pod: &PodInfo, objects: &ObjectStore) -> LabelSelector {
    objects.default_selector(pod)
}

/// The constraints of `pod` for one side (hard or soft): its own when it declares any,
/// otherwise the defaults with the deduced selector (none when nothing selects the pod).
pub(crate) fn constraints_for(
    pod: &PodInfo,
    action: WhenUnsatisfiable,
    defaults: &[TopologySpreadConstraint],
    objects: &ObjectStore,
) -> Vec<Constraint> {
    if !pod.topology_spread_constraints.is_empty() {
        return pod
            .topology_spread_constraints
            .iter()
            .filter(|c| c.when_unsatisfiable == action)
            .map(|c| Constraint::new(c, c.selector.clone()))
            .collect();
    }
    if !defaults.iter().any(|c| c.when_unsatisfiable == action) {
        return Vec::new();
    }
    let selector = default_selector(pod, objects);
    if selector.requirements.is_empty() {
        return Vec::new();
    }
    defaults
        .iter()
        .filter(|c| c.when_unsatisfiable == action)
        .map(|c| Constraint::new(c, selector.clone()))
        .collect()
}
