//! `Snapshot`: the immutable view of the cluster one scheduling cycle works on.

use std::collections::HashMap;
use std::sync::Arc;

use kubesched_model::NodeInfo;

/// Every node with its pods, in the order nodes are tried, plus precomputed lists.
///
/// The cache rebuilds it incrementally between cycles (copying only changed nodes);
/// plugins only read it.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    node_infos: Vec<Arc<NodeInfo>>,
    index: HashMap<String, usize>,
    have_pods_with_affinity: Vec<Arc<NodeInfo>>,
    have_pods_with_required_anti_affinity: Vec<Arc<NodeInfo>>,
    /// Claim `namespace/name` → how many pods on snapshot nodes use it.
    used_pvcs: HashMap<String, u32>,
    /// The cache generation this snapshot reflects.
    pub generation: u64,
}

impl Snapshot {
    /// A snapshot of these nodes (placeholders without a node object are left out).
    pub fn new(node_infos: Vec<Arc<NodeInfo>>) -> Self {
        let mut s = Self::default();
        s.set_nodes(node_infos);
        s
    }

    /// Replaces the node list and recomputes every derived list.
    pub fn set_nodes(&mut self, node_infos: Vec<Arc<NodeInfo>>) {
        self.node_infos = node_infos
            .into_iter()
            .filter(|n| n.node().is_some())
            .collect();
        self.index = self
            .node_infos
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name().to_string(), i))
            .collect();
        self.recompute_lists();
    }

    /// Recomputes the affinity lists and the PVC set from the node list.
    pub fn recompute_lists(&mut self) {
        self.have_pods_with_affinity = self
            .node_infos
            .iter()
            .filter(|n| !n.pods_with_affinity.is_empty())
            .cloned()
            .collect();
        self.have_pods_with_required_anti_affinity = self
            .node_infos
            .iter()
            .filter(|n| !n.pods_with_required_anti_affinity.is_empty())
            .cloned()
            .collect();
        self.used_pvcs.clear();
        for n in &self.node_infos {
            for (claim, count) in &n.pvc_ref_counts {
                *self.used_pvcs.entry(claim.clone()).or_insert(0) += count;
            }
        }
    }

    /// Replaces one node's info in place (same name, same position). The set of claims in
    /// use is kept exact incrementally (old node's claims out, new node's in); the affinity
    /// lists are not touched, so call [`Snapshot::recompute_lists`] when a node starts or
    /// stops having pods with affinity. Returns false (and changes nothing) when the node
    /// is not in the snapshot.
    pub fn replace(&mut self, info: Arc<NodeInfo>) -> bool {
        let Some(&i) = self.index.get(info.name()) else {
            return false;
        };
        let old = std::mem::replace(&mut self.node_infos[i], info);
        let new = &self.node_infos[i];
        if old.pvc_ref_counts != new.pvc_ref_counts {
            for (claim, count) in &old.pvc_ref_counts {
                if let Some(total) = self.used_pvcs.get_mut(claim) {
                    *total = total.saturating_sub(*count);
                    if *total == 0 {
                        self.used_pvcs.remove(claim);
                    }
                }
            }
            for (claim, count) in &new.pvc_ref_counts {
                *self.used_pvcs.entry(claim.clone()).or_insert(0) += count;
            }
        }
        true
    }

    /// Every node, in the order they are tried.
    pub fn list(&self) -> &[Arc<NodeInfo>] {
        &self.node_infos
    }

    /// One node by name.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|&i| &self.node_infos[i])
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.node_infos.len()
    }

    /// Nodes that run at least one pod with pod affinity or anti-affinity terms.
    pub fn have_pods_with_affinity(&self) -> &[Arc<NodeInfo>] {
        &self.have_pods_with_affinity
    }

    /// Nodes that run at least one pod with required anti-affinity terms.
    pub fn have_pods_with_required_anti_affinity(&self) -> &[Arc<NodeInfo>] {
        &self.have_pods_with_required_anti_affinity
    }

    /// Whether some pod on some node uses the claim `namespace/name`.
    pub fn is_pvc_used_by_pods(&self, key: &str) -> bool {
        self.used_pvcs.contains_key(key)
    }
}
