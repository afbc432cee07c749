//! `Snapshot`: the immutable view of the cluster one scheduling cycle works on.

use std::collections::HashMap;
use std::sync::Arc;

use kubesched_model::NodeInfo;

/// Some of the snapshot's nodes, in snapshot order, with their positions in the full list
/// so one node can be put in or taken out without a scan of every node.
#[derive(Debug, Clone, Default)]
struct NodeSubset {
    nodes: Vec<Arc<NodeInfo>>,
    positions: Vec<usize>,
}

impl NodeSubset {
    fn rebuild(&mut self, all: &[Arc<NodeInfo>], member: impl Fn(&NodeInfo) -> bool) {
        self.nodes.clear();
        self.positions.clear();
        for (i, n) in all.iter().enumerate() {
            if member(n) {
                self.nodes.push(Arc::clone(n));
                self.positions.push(i);
            }
        }
    }

    /// Puts the node at position `i` of the full list in (replacing what was there) or
    /// takes it out.
    fn set(&mut self, i: usize, info: &Arc<NodeInfo>, member: bool) {
        match (self.positions.binary_search(&i), member) {
            (Ok(k), true) => self.nodes[k] = Arc::clone(info),
            (Ok(k), false) => {
                self.nodes.remove(k);
                self.positions.remove(k);
            }
            (Err(k), true) => {
                self.nodes.insert(k, Arc::clone(info));
                self.positions.insert(k, i);
            }
            (Err(_), false) => {}
        }
    }
}

/// Every node with its pods, in the order nodes are tried, plus precomputed lists.
///
/// The cache rebuilds it incrementally between cycles (copying only changed nodes);
/// plugins only read it.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    node_infos: Vec<Arc<NodeInfo>>,
    index: HashMap<String, usize>,
    have_pods_with_affinity: NodeSubset,
    have_pods_with_required_anti_affinity: NodeSubset,
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
        self.have_pods_with_affinity
            .rebuild(&self.node_infos, |n| !n.pods_with_affinity.is_empty());
        self.have_pods_with_required_anti_affinity
            .rebuild(&self.node_infos, |n| {
                !n.pods_with_required_anti_affinity.is_empty()
            });
        self.used_pvcs.clear();
        for n in &self.node_infos {
            for (claim, count) in &n.pvc_ref_counts {
                *self.used_pvcs.entry(claim.clone()).or_insert(0) += count;
            }
        }
    }

    /// Replaces one node's info in place (same name, same position). The affinity lists and
    /// the set of claims in use are kept exact incrementally (the old node out, the new
    /// one in). Returns false (and changes nothing) when the node is not in the snapshot.
    pub fn replace(&mut self, info: Arc<NodeInfo>) -> bool {
        let Some(&i) = self.index.get(info.name()) else {
            return false;
        };
        let old = std::mem::replace(&mut self.node_infos[i], info);
        let new = &self.node_infos[i];
        self.have_pods_with_affinity
            .set(i, new, !new.pods_with_affinity.is_empty());
        self.have_pods_with_required_anti_affinity.set(
            i,
            new,
            !new.pods_with_required_anti_affinity.is_empty(),
        );
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

    /// The snapshot narrowed to the nodes named in `keep` (a pod-group cycle's placement):
    /// those nodes in the same order with their own lists; the claims in use stay those of
    /// the whole cluster, since a claim a pod elsewhere uses is in use wherever the group
    /// goes.
    pub fn restricted_to(&self, keep: &std::collections::HashSet<String>) -> Self {
        let mut s = Self::new(
            self.node_infos
                .iter()
                .filter(|n| keep.contains(n.name()))
                .cloned()
                .collect(),
        );
        s.used_pvcs = self.used_pvcs.clone();
        s.generation = self.generation;
        s
    }

    /// Every node, in the order they are tried.
    pub fn list(&self) -> &[Arc<NodeInfo>] {
        &self.node_infos
    }

    /// One node by name.
    pub fn get(&self, name: &str) -> Option<&Arc<NodeInfo>> {
        self.index.get(name).map(|&i| &self.node_infos[i])
    }

    /// Where a node is in [`Snapshot::list`].
    pub fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.node_infos.len()
    }

    /// Nodes that run at least one pod with pod affinity or anti-affinity terms.
    pub fn have_pods_with_affinity(&self) -> &[Arc<NodeInfo>] {
        &self.have_pods_with_affinity.nodes
    }

    /// Nodes that run at least one pod with required anti-affinity terms.
    pub fn have_pods_with_required_anti_affinity(&self) -> &[Arc<NodeInfo>] {
        &self.have_pods_with_required_anti_affinity.nodes
    }

    /// Whether some pod on some node uses the claim `namespace/name`.
    pub fn is_pvc_used_by_pods(&self, key: &str) -> bool {
        self.used_pvcs.contains_key(key)
    }
}
