//! Seeded random changes to a node list, for checking that a plugin which keeps per-node
//! results from one cycle to the next answers exactly as a freshly built one would.

use std::sync::Arc;

use kubesched_model::{Labels, Node, NodeInfo};

use crate::{NodeBuilder, PodBuilder, node_info};

/// The zone label the churn moves nodes between.
const ZONE: &str = "topology.kubernetes.io/zone";

/// A small deterministic generator and the changes it drives. Every change replaces the
/// touched `Arc<NodeInfo>` (as the scheduler cache does) and leaves the others as they
/// were, so plugins see both kept and new node objects.
#[derive(Debug, Clone)]
pub struct Churn {
    state: u64,
    made: usize,
    zones: Vec<String>,
}

impl Churn {
    /// A churn over these zone names (a node may also end up with no zone label).
    pub fn new(seed: u64, zones: &[&str]) -> Self {
        Self {
            state: seed | 1,
            made: 0,
            zones: zones.iter().map(|z| z.to_string()).collect(),
        }
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        if n == 0 {
            0
        } else {
            (self.state % n as u64) as usize
        }
    }

    /// A fresh name with this prefix.
    pub fn name(&mut self, prefix: &str) -> String {
        self.made += 1;
        format!("{prefix}-{}", self.made)
    }

    fn zone_label(&mut self) -> Option<String> {
        let k = self.below(self.zones.len() + 1);
        self.zones.get(k).cloned()
    }

    /// A new node with a random zone (or none) and no pods.
    pub fn node(&mut self) -> Arc<NodeInfo> {
        let name = self.name("node");
        let mut b = NodeBuilder::new(&name);
        if let Some(z) = self.zone_label() {
            b = b.zone(&z);
        }
        node_info(b, &[])
    }

    /// Applies one random change to `nodes`: a pod from `make_pod` lands on a node, a pod
    /// leaves, a node moves to another zone, a node goes, a node comes, or two nodes swap
    /// places. `make_pod` gets the churn (for its own choices) and the pod's node.
    pub fn step(
        &mut self,
        nodes: &mut Vec<Arc<NodeInfo>>,
        make_pod: &mut dyn FnMut(&mut Churn, &str) -> PodBuilder,
    ) {
        let op = self.below(10);
        if nodes.is_empty() || op == 9 {
            let n = self.node();
            let at = self.below(nodes.len() + 1);
            nodes.insert(at, n);
            return;
        }
        let i = self.below(nodes.len());
        match op {
            0..=4 => {
                let mut info = (*nodes[i]).clone();
                let pod = make_pod(self, info.name()).info();
                info.add_pod(pod);
                nodes[i] = Arc::new(info);
            }
            5 | 6 => {
                let mut info = (*nodes[i]).clone();
                if let Some(p) = info.pods.get(self.below(info.pods.len())).cloned() {
                    info.remove_pod(&p.uid);
                }
                nodes[i] = Arc::new(info);
            }
            7 => {
                let mut info = (*nodes[i]).clone();
                let Some(node) = info.node() else {
                    return;
                };
                let mut relabelled: Node = (**node).clone();
                let mut labels: Labels = relabelled.labels.clone();
                match self.zone_label() {
                    Some(z) => labels.insert(ZONE.to_string(), z),
                    None => labels.remove(ZONE),
                };
                relabelled.labels = labels;
                info.set_node(Arc::new(relabelled));
                nodes[i] = Arc::new(info);
            }
            _ => {
                if self.below(2) == 0 {
                    nodes.remove(i);
                } else {
                    let j = self.below(nodes.len());
                    nodes.swap(i, j);
                }
            }
        }
    }
}
