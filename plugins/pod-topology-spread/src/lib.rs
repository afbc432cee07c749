//! PodTopologySpread: spreads matching pods over topology domains (zones, hosts, any node
//! label) within each constraint's `maxSkew`.
//!
//! Hard (DoNotSchedule) constraints filter: PreFilter counts matching pods per domain
//! once per cycle, with the global minimum kept exact by AddPod/RemovePod, so Filter is a
//! lookup per constraint. The per-node counts behind PreFilter and PreScore are kept
//! across cycles (a `NodeTally` per constraint set) and redone only for nodes that changed. Soft (ScheduleAnyway) constraints score, fewer matching pods
//! being better. Pods that declare no constraints get the system defaults (or the listed
//! `defaultConstraints`) with a selector deduced from their Services and controller. It
//! must not walk a node's pods in Filter, and it reads Services and controllers only
//! through the handle's object store.

mod args;
mod common;
mod filtering;
mod node_values;
mod scoring;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::k8s_openapi::api::core::v1::TopologySpreadConstraint as ApiConstraint;
use kubesched_framework::model::{
    InclusionPolicy, Labels, PodInfo, TopologySpreadConstraint, WhenUnsatisfiable,
};
use kubesched_framework::registry::PluginArgs;
use kubesched_framework::{EnqueueExtensions, Handle, PluginError, TallyCache};

pub use args::{DefaultingType, PodTopologySpreadArgs};

use crate::common::{
    Constraint, CountKey, HOSTNAME, NodeCounts, TALLY_SLOTS, ZONE, constraints_for, has_all_keys,
};
use crate::filtering::DomainTally;
use crate::scoring::ValueTotals;

/// The plugin's registered name.
pub const NAME: &str = "PodTopologySpread";
/// A hard constraint's skew would exceed maxSkew on the node.
pub const ERR_REASON_CONSTRAINTS_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints";
/// The node lacks a hard constraint's topology key.
pub const ERR_REASON_NODE_LABEL_NOT_MATCH: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

/// Upstream's system default constraints: maxSkew 3 per host, 5 per zone, both soft.
pub fn system_default_constraints() -> Vec<ApiConstraint> {
    [(HOSTNAME, 3), (ZONE, 5)]
        .into_iter()
        .map(|(key, max_skew)| ApiConstraint {
            max_skew,
            topology_key: key.to_string(),
            when_unsatisfiable: "ScheduleAnyway".to_string(),
            ..Default::default()
        })
        .collect()
}

#[derive(Debug)]
struct Inner {
    handle: Handle,
    /// Constraints for pods that declare none (selector filled per pod).
    defaults: Vec<TopologySpreadConstraint>,
    system_defaulted: bool,
    /// TaintTolerationComparisonOperators, read once.
    taint_comparisons: bool,
    /// PreFilter's per-node counts, kept across cycles.
    filter_tallies: TallyCache<CountKey, NodeCounts, Vec<DomainTally>>,
    /// PreScore's per-node counts, kept across cycles.
    score_tallies: TallyCache<CountKey, NodeCounts, ValueTotals>,
}

/// The PodTopologySpread plugin.
#[derive(Debug, Clone)]
pub struct PodTopologySpread {
    inner: Arc<Inner>,
}

impl PodTopologySpread {
    /// Builds the plugin; invalid args are refused.
    pub fn new(args: &PodTopologySpreadArgs, handle: &Handle) -> Result<Self, PluginError> {
        args.validate(handle.features()).map_err(PluginError)?;
        let system_defaulted = args.defaulting_type == DefaultingType::System;
        let api_defaults = if system_defaulted {
            system_default_constraints()
        } else {
            args.default_constraints.clone()
        };
        let no_labels = Labels::new();
        let defaults = api_defaults
            .iter()
            .enumerate()
            .map(|(i, c)| {
                TopologySpreadConstraint::compile(
                    c,
                    &no_labels,
                    &format!("defaultConstraints[{i}]"),
                )
                .map_err(|e| PluginError(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            inner: Arc::new(Inner {
                handle: handle.clone(),
                defaults,
                system_defaulted,
                taint_comparisons: handle
                    .features()
                    .enabled(kubesched_framework::Feature::TaintTolerationComparisonOperators),
                filter_tallies: TallyCache::new(TALLY_SLOTS),
                score_tallies: TallyCache::new(TALLY_SLOTS),
            }),
        })
    }

    fn constraints(&self, pod: &PodInfo, action: WhenUnsatisfiable) -> Vec<Constraint> {
        self.inner.constraints(pod, action)
    }
}

impl Inner {
    fn constraints(&self, pod: &PodInfo, action: WhenUnsatisfiable) -> Vec<Constraint> {
        let mut constraints = constraints_for(pod, action, &self.defaults, self.handle.objects());
        for c in &mut constraints {
            c.taint_comparisons = self.taint_comparisons;
        }
        constraints
    }
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::model::k8s_openapi::api::apps::v1 as appsv1;
use kubesched_framework::model::k8s_openapi::api::core::v1 as corev1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: PodTopologySpread,
    args: PodTopologySpreadArgs,
    kinds: [
        corev1::Service,
        corev1::ReplicationController,
        appsv1::ReplicaSet,
        appsv1::StatefulSet,
    ],
    factory: PodTopologySpread::new,
}

fn queue_if(cond: bool) -> QueueingHint {
    if cond {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

impl Inner {
    /// A pod was added, relabelled, given tolerations, or deleted.
    fn pod_change_hint(
        &self,
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
        // Only the pod itself, or assigned pods of its namespace, take part in its spreading.
        let involved = |p: &PodInfo| {
            p.uid == pod.uid || (p.node_name.is_some() && p.namespace == pod.namespace)
        };
        if modified.is_some_and(|p| !involved(p)) || original.is_some_and(|p| !involved(p)) {
            return Ok(QueueingHint::Skip);
        }
        let constraints = self.constraints(pod, WhenUnsatisfiable::DoNotSchedule);
        let any_selects = |labels: &Labels| constraints.iter().any(|c| c.selector.matches(labels));
        Ok(match (original, modified) {
            (Some(o), Some(m)) => {
                if pod.uid == m.uid
                    && m.tolerations != o.tolerations
                    && constraints
                        .iter()
                        .any(|c| c.node_taints_policy == InclusionPolicy::Honor)
                {
                    // New tolerations can bring tainted nodes into the domains.
                    QueueingHint::Queue
                } else if m.labels == o.labels {
                    QueueingHint::Skip
                } else {
                    queue_if(
                        constraints.iter().any(|c| {
                            c.selector.matches(&o.labels) != c.selector.matches(&m.labels)
                        }),
                    )
                }
            }
            (None, Some(m)) => queue_if(any_selects(&m.labels)),
            (Some(o), None) => queue_if(any_selects(&o.labels)),
            (None, None) => return Err("a pod event without a pod".into()),
        })
    }

    /// A node was added, deleted, relabelled or retainted.
    fn node_change_hint(
        &self,
        pod: &PodInfo,
        old: Option<&EventObject>,
        new: Option<&EventObject>,
    ) -> Result<QueueingHint, String> {
        let original = old
            .map(|o| o.as_node().ok_or("expected a node as the old object"))
            .transpose()?;
        let modified = new
            .map(|o| o.as_node().ok_or("expected a node as the new object"))
            .transpose()?;
        let constraints = self.constraints(pod, WhenUnsatisfiable::DoNotSchedule);
        let original_has = original.is_some_and(|n| has_all_keys(&n.labels, &constraints));
        let modified_has = modified.is_some_and(|n| has_all_keys(&n.labels, &constraints));
        Ok(match (original, modified) {
            (Some(o), Some(m)) => {
                let keys_changed = constraints
                    .iter()
                    .any(|c| o.labels.get(&c.topology_key) != m.labels.get(&c.topology_key));
                queue_if(
                    original_has != modified_has
                        || (modified_has && (keys_changed || o.taints != m.taints)),
                )
            }
            (None, Some(_)) => queue_if(modified_has),
            (Some(_), None) => queue_if(original_has),
            (None, None) => return Err("a node event without a node".into()),
        })
    }
}

impl EnqueueExtensions for PodTopologySpread {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let pods = Arc::clone(&self.inner);
        let target = Arc::clone(&self.inner);
        let nodes = Arc::clone(&self.inner);
        vec![
            // v1.37 (#135905): other pods count once bound; the pod's own new tolerations
            // matter with nodeTaintsPolicy Honor.
            ClusterEventWithHint::with_hint(
                EventResource::AssignedPod,
                ActionType::ADD
                    .union(ActionType::UPDATE_POD_LABEL)
                    .union(ActionType::DELETE),
                move |pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
                    pods.pod_change_hint(pod, old, new)
                },
            ),
            ClusterEventWithHint::with_hint(
                EventResource::TargetPod,
                ActionType::UPDATE_POD_TOLERATION,
                move |pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
                    target.pod_change_hint(pod, old, new)
                },
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Node,
                ActionType::ADD
                    .union(ActionType::DELETE)
                    .union(ActionType::UPDATE_NODE_LABEL)
                    .union(ActionType::UPDATE_NODE_TAINT),
                move |pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
                    nodes.node_change_hint(pod, old, new)
                },
            ),
        ]
    }
}
