//! TopologyPlacement: upstream v1.37's PlacementGenerate plugin (TopologyAwareWorkloadScheduling,
//! alpha; in the default profile only when the gate is on). For a PodGroup whose
//! `spec.schedulingConstraints.topology[0].key` names a node label, it proposes one
//! candidate placement per value of that label (a topology domain: a zone, a rack), so the
//! pod-group cycle places the whole group within one domain. Once members of the group are
//! already placed, only their domain is proposed. A PodGroup without a topology constraint
//! gets the parent placement back unchanged.
//!
//! It reads PodGroups, the snapshot's nodes and the group's placed members; it schedules
//! nothing and writes nothing: trying the placements and choosing one belong to the
//! scheduler's pod-group cycle.

use std::collections::BTreeMap;
use std::sync::Arc;

use kubesched_framework::model::NodeInfo;
use kubesched_framework::workload::{Placement, PlacementGeneratePlugin, PodGroup, PodGroupInfo};
use kubesched_framework::{CycleState, Handle, PluginError, Status, Store};

/// The plugin's registered name.
pub const NAME: &str = "TopologyPlacement";

/// The error when the group's PodGroup is gone (upstream's lister NotFound).
pub fn pod_group_not_found(name: &str) -> String {
    format!("podgroup.scheduling.k8s.io {name:?} not found")
}

/// The error when the domain of the group's placed members cannot be told.
pub fn undetermined_domain(cause: &str) -> String {
    format!("cannot determine domain for already scheduled pods: {cause}")
}

/// The TopologyPlacement plugin.
pub struct TopologyPlacement {
    handle: Handle,
    groups: Arc<Store<PodGroup>>,
}

impl std::fmt::Debug for TopologyPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopologyPlacement").finish_non_exhaustive()
    }
}

impl TopologyPlacement {
    /// Builds the plugin over the handle's PodGroups and snapshot.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
            groups: handle.objects().of::<PodGroup>(),
        })
    }

    /// The domain the group's already placed members are in (None: none is placed).
    fn placed_domain(&self, group: &PodGroupInfo, key: &str) -> Result<Option<String>, String> {
        let snapshot = self.handle.snapshot();
        let mut domain: Option<String> = None;
        for pod in &group.scheduled {
            let Some(node_name) = pod.node_name.as_deref() else {
                continue;
            };
            let node = snapshot.get(node_name).ok_or_else(|| {
                format!(
                    "getting node for pod {}: node {node_name:?} not found",
                    pod.key()
                )
            })?;
            let value = label(node, key)
                .ok_or_else(|| format!("no topology domain found for pod {}", pod.key()))?;
            match &domain {
                Some(d) if d != value => {
                    return Err(format!(
                        "more than 1 domain found for pod group: {d}, {value}"
                    ));
                }
                Some(_) => {}
                None => domain = Some(value.to_string()),
            }
        }
        Ok(domain)
    }
}

kubesched_framework::register_plugin! {
    name: NAME,
    plugin: TopologyPlacement,
    kinds: [PodGroup],
    factory: TopologyPlacement::new,
}

/// The node's value of label `key`.
fn label<'a>(node: &'a NodeInfo, key: &str) -> Option<&'a str> {
    node.node()?.labels.get(key).map(String::as_str)
}

/// The PodGroup's topology key: its first topology constraint's (the API allows one).
pub fn topology_key(pg: &PodGroup) -> Option<&str> {
    pg.spec
        .scheduling_constraints
        .as_ref()?
        .topology
        .as_deref()?
        .first()
        .map(|t| t.key.as_str())
}

impl PlacementGeneratePlugin for TopologyPlacement {
    fn generate_placements(
        &self,
        _state: &mut CycleState,
        group: &PodGroupInfo,
        parent: &Placement,
    ) -> Result<Vec<Placement>, Status> {
        let pg = self
            .groups
            .get(Some(&group.namespace), &group.name)
            .ok_or_else(|| Status::error(pod_group_not_found(&group.name)))?;
        let Some(key) = topology_key(&pg) else {
            return Ok(vec![parent.clone()]);
        };
        let required = self
            .placed_domain(group, key)
            .map_err(|cause| Status::error(undetermined_domain(&cause)))?;
        // Domains in name order (upstream's map has none), nodes in the parent's order.
        let mut domains: BTreeMap<&str, Vec<Arc<NodeInfo>>> = BTreeMap::new();
        for node in &parent.nodes {
            let Some(value) = label(node, key) else {
                continue;
            };
            if required.as_deref().is_some_and(|r| r != value) {
                continue;
            }
            domains.entry(value).or_default().push(node.clone());
        }
        tracing::trace!(pod_group = %group.key(), key, domains = domains.len(), "topology placements");
        Ok(domains
            .into_iter()
            .map(|(domain, nodes)| Placement::new(domain, nodes))
            .collect())
    }
}

#[cfg(test)]
mod tests;
