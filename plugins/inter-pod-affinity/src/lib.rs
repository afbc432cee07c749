//! InterPodAffinity: the required and preferred pod affinity and anti-affinity of the
//! incoming pod, and (for symmetry) the required anti-affinity and the preferences of the
//! pods already running.
//!
//! PreFilter counts, once per cycle, the topology pairs (node label key and value) where
//! matching pods run; Filter then only looks the candidate node's labels up in those
//! counts, and AddPod/RemovePod keep them exact for nominated pods and preemption.
//! PreScore sums term weights per topology pair; Score looks them up the same way. The
//! per-node parts of those sums are kept across cycles (a `NodeTally` per set of terms)
//! and redone only for nodes that changed. It must
//! not walk a node's pods in Filter or Score, and it reads namespaces only through the
//! handle's object store.

mod args;
mod filtering;
mod scoring;
mod topology;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::{AffinityTerm, Labels, PodInfo};
use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{EnqueueExtensions, Handle, PluginError, TallyCache};

use crate::filtering::{ExistingKey, ExistingOnNode, IncomingKey, IncomingOnNode, IncomingTotals};
use crate::scoring::{ScoreKey, ScoreMap, ScoreOnNode};
use crate::topology::PairCounts;

pub use args::{InterPodAffinityArgs, MAX_HARD_POD_AFFINITY_WEIGHT, MIN_HARD_POD_AFFINITY_WEIGHT};

/// The plugin's registered name.
pub const NAME: &str = "InterPodAffinity";
/// A node's domain holds a pod whose required anti-affinity matches the incoming pod.
pub const ERR_REASON_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";
/// The incoming pod's required affinity is not met on the node.
pub const ERR_REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// The incoming pod's required anti-affinity is not met on the node.
pub const ERR_REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";

/// The InterPodAffinity plugin.
#[derive(Debug, Clone)]
pub struct InterPodAffinity {
    args: InterPodAffinityArgs,
    handle: Handle,
    tallies: Arc<Tallies>,
}

/// Per-node results of PreFilter and PreScore kept across cycles, per key.
#[derive(Debug)]
struct Tallies {
    existing: TallyCache<ExistingKey, ExistingOnNode, Arc<PairCounts>>,
    incoming: TallyCache<IncomingKey, IncomingOnNode, IncomingTotals>,
    score: TallyCache<ScoreKey, ScoreOnNode, Arc<ScoreMap>>,
}

/// Tallies kept per kind; a few keys cover the workloads of a cluster at once.
const TALLY_SLOTS: usize = 8;

impl InterPodAffinity {
    /// Builds the plugin; args out of range are refused.
    pub fn new(args: &InterPodAffinityArgs, handle: &Handle) -> Result<Self, PluginError> {
        args.validate(handle.features()).map_err(PluginError)?;
        Ok(Self {
            args: args.clone(),
            handle: handle.clone(),
            tallies: Arc::new(Tallies {
                existing: TallyCache::new(TALLY_SLOTS),
                incoming: TallyCache::new(TALLY_SLOTS),
                score: TallyCache::new(TALLY_SLOTS),
            }),
        })
    }
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::model::k8s_openapi::api::core::v1 as corev1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: InterPodAffinity,
    args: InterPodAffinityArgs,
    kinds: [corev1::Namespace],
    factory: InterPodAffinity::new,
}

/// Whether `other` matches every term of the rejected pod (affinity wants one pod
/// matching them all). Hints see the terms as written, with no namespace labels (upstream
/// does the same: hints must stay cheap).
fn hint_matches_all(terms: &[AffinityTerm], other: &PodInfo) -> bool {
    !terms.is_empty() && terms.iter().all(|t| hint_matches(t, other))
}

/// Whether `other` matches some term (one anti-affinity term is enough to repel: v1.37,
/// #139161).
fn hint_matches_any(terms: &[AffinityTerm], other: &PodInfo) -> bool {
    terms.iter().any(|t| hint_matches(t, other))
}

fn hint_matches(term: &AffinityTerm, other: &PodInfo) -> bool {
    term.matches(&other.namespace, &Labels::new(), &other.labels)
}

/// A pod was added, relabelled or deleted.
fn pod_change_hint(
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let original = old
        .map(|o| o.as_pod().ok_or("expected a pod as the old object"))
        .transpose()?;
    let modified = new
        .map(|o| o.as_pod().ok_or("expected a pod as the new object"))
        .transpose()?;
    // The rejected pod's own labels changed: existing pods' anti-affinity may no longer
    // repel it (v1.36, #135394).
    if let (Some(o), Some(m)) = (original, modified)
        && m.uid == pod.uid
        && o.labels != m.labels
    {
        return Ok(QueueingHint::Queue);
    }
    // Only assigned pods count in inter-pod affinity.
    if modified.is_some_and(|p| p.node_name.is_none())
        || original.is_some_and(|p| p.node_name.is_none())
    {
        return Ok(QueueingHint::Skip);
    }
    let affinity = &pod.required_affinity_terms;
    let anti = &pod.required_anti_affinity_terms;
    let queue = match (original, modified) {
        // Updated: it now matches the affinity, or no longer matches the anti-affinity.
        (Some(o), Some(m)) => {
            (!hint_matches_all(affinity, o) && hint_matches_all(affinity, m))
                || (hint_matches_any(anti, o) && !hint_matches_any(anti, m))
        }
        // Added: it may satisfy the affinity.
        (None, Some(m)) => hint_matches_all(affinity, m),
        // Deleted: it may have been what the anti-affinity objected to, or its own
        // anti-affinity may have repelled the pod (v1.36, #135325).
        (Some(o), None) => {
            hint_matches_any(anti, o) || hint_matches_any(&o.required_anti_affinity_terms, pod)
        }
        (None, None) => return Err("a pod event without a pod".into()),
    };
    Ok(if queue {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    })
}

/// A node was added or had its labels changed (upstream's fine-grained hint since
/// v1.32): for an affinity term, a node that gains the topology key or moves to another
/// domain of it; for an anti-affinity term, a node that gains, loses or changes it. A
/// label change elsewhere on the node changes nothing for this plugin.
fn node_change_hint(
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Result<QueueingHint, String> {
    let modified = new
        .and_then(EventObject::as_node)
        .ok_or("expected a node as the new object")?;
    let original = old.and_then(EventObject::as_node);
    let changed = |key: &str, losing_counts: bool| match original {
        None => modified.labels.contains_key(key),
        Some(o) => match (o.labels.get(key), modified.labels.get(key)) {
            (None, Some(_)) => true,
            (Some(_), None) => losing_counts,
            (Some(a), Some(b)) => a != b,
            (None, None) => false,
        },
    };
    let queue = pod
        .required_affinity_terms
        .iter()
        .any(|t| changed(&t.topology_key, false))
        || pod
            .required_anti_affinity_terms
            .iter()
            .any(|t| changed(&t.topology_key, true));
    Ok(if queue {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    })
}

impl EnqueueExtensions for InterPodAffinity {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            // v1.37 (#135905): other pods count once bound; the pod's own relabelling is a
            // TargetPod event.
            ClusterEventWithHint::with_hint(
                EventResource::AssignedPod,
                ActionType::ADD
                    .union(ActionType::UPDATE_POD_LABEL)
                    .union(ActionType::DELETE),
                pod_change_hint,
            ),
            ClusterEventWithHint::with_hint(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_LABEL,
                pod_change_hint,
            ),
            // Not UpdateNodeTaint: a taint never changes this plugin's answer, and with
            // queueing hints no Node/Add is dropped before the hints see it (upstream v1.34
            // registers Add | UpdateNodeLabel for the same reason). A node added with a taint
            // that rejects the pod makes TaintToleration a rejector too, whose hint follows
            // the taint's removal.
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_LABEL),
                node_change_hint,
            ),
        ]
    }
}
