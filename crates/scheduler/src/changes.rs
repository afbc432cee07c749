//! Cluster changes as both backends deliver them, and how each one reaches the cache,
//! the queue and the object store.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use kubesched_framework::events::{ActionType, EventObject, EventResource};
use kubesched_framework::model::PodObject;

/// A change observed in the cluster (by a watcher or by the in-memory cluster).
#[derive(Debug, Clone)]
pub enum ClusterChange {
    /// A pod appeared.
    PodAdded(PodObject),
    /// A pod changed.
    PodUpdated(PodObject, PodObject),
    /// A pod was deleted.
    PodDeleted(PodObject),
    /// A node appeared.
    NodeAdded(Arc<api::Node>),
    /// A node changed.
    NodeUpdated(Arc<api::Node>, Arc<api::Node>),
    /// A node was deleted.
    NodeDeleted(Arc<api::Node>),
    /// Another kind changed; the backend already updated the object store.
    Other {
        /// The kind, as queueing events name it.
        resource: EventResource,
        /// What happened.
        action: ActionType,
        /// The object before the change (updates and deletions), for queueing hints.
        old: Option<EventObject>,
        /// The object after the change (additions and updates), for queueing hints.
        new: Option<EventObject>,
    },
}

/// Which node fields changed, as upstream's node update event classification.
pub fn node_update_actions(old: &api::Node, new: &api::Node) -> ActionType {
    let mut a = ActionType(0);
    let alloc = |n: &api::Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    if alloc(old) != alloc(new) {
        a = a.union(ActionType::UPDATE_NODE_ALLOCATABLE);
    }
    if old.metadata.labels != new.metadata.labels {
        a = a.union(ActionType::UPDATE_NODE_LABEL);
    }
    let taints = |n: &api::Node| {
        (
            n.spec.as_ref().and_then(|s| s.taints.clone()),
            n.spec.as_ref().and_then(|s| s.unschedulable),
        )
    };
    if taints(old) != taints(new) {
        a = a.union(ActionType::UPDATE_NODE_TAINT);
    }
    let conditions = |n: &api::Node| {
        n.status.as_ref().map(|s| {
            s.conditions
                .iter()
                .flatten()
                .map(|c| (c.type_.clone(), c.status.clone()))
                .collect::<Vec<_>>()
        })
    };
    if conditions(old) != conditions(new) {
        a = a.union(ActionType::UPDATE_NODE_CONDITION);
    }
    if old.metadata.annotations != new.metadata.annotations {
        a = a.union(ActionType::UPDATE_NODE_ANNOTATION);
    }
    let declared = |n: &api::Node| n.status.as_ref().and_then(|s| s.declared_features.clone());
    if declared(old) != declared(new) {
        a = a.union(ActionType::UPDATE_NODE_DECLARED_FEATURE);
    }
    a
}

/// Whether a pod is bound (or assigned) to a node.
pub fn is_assigned(pod: &api::Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Whether a pod has finished (its resources are released on the node).
pub fn is_terminal(pod: &api::Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}
