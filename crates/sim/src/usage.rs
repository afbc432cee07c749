//! What the pods on each node of the in-memory cluster request against what the node
//! offers, for the report's before/after charts.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubesched_model::{Node, PodInfo, PodObject};
use serde::Serialize;

use crate::cluster::SimCluster;

/// Requested against allocatable on one node at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeUsage {
    /// The node.
    pub node: String,
    /// Allocatable cpu, millicores.
    pub cpu_allocatable: i64,
    /// Requested cpu of the pods on it, millicores.
    pub cpu_requested: i64,
    /// Allocatable memory, bytes.
    pub memory_allocatable: i64,
    /// Requested memory, bytes.
    pub memory_requested: i64,
    /// Pods the node admits.
    pub pods_allocatable: i64,
    /// Pods on it.
    pub pods: i64,
}

/// Every node's usage now: pods bound to it that have not finished count. `compiled`
/// gives a pod's compiled form when the scheduler has it (so a packed pod is not decoded
/// to be counted).
pub fn node_usage(
    cluster: &SimCluster,
    compiled: &dyn Fn(&PodObject) -> Option<Arc<PodInfo>>,
) -> Vec<NodeUsage> {
    let mut usage: BTreeMap<String, NodeUsage> = BTreeMap::new();
    for node in cluster.nodes() {
        let Ok(model) = Node::new(node) else {
            continue;
        };
        usage.insert(
            model.name.clone(),
            NodeUsage {
                node: model.name.clone(),
                cpu_allocatable: model.allocatable.milli_cpu,
                cpu_requested: 0,
                memory_allocatable: model.allocatable.memory,
                memory_requested: 0,
                pods_allocatable: model.allocatable.allowed_pod_number,
                pods: 0,
            },
        );
    }
    for pod in cluster.pods() {
        if pod.is_terminal() {
            continue;
        }
        let Some(u) = pod.node_name().and_then(|node| usage.get_mut(node)) else {
            continue;
        };
        let Some(info) = compiled(&pod).or_else(|| PodInfo::new(&pod).ok().map(Arc::new)) else {
            continue;
        };
        u.cpu_requested += info.requests.milli_cpu;
        u.memory_requested += info.requests.memory;
        u.pods += 1;
    }
    usage.into_values().collect()
}
