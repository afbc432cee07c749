//! The node tree: node names grouped by zone, listed round-robin across zones so that the
//! nodes tried first are spread over the failure domains.

use std::collections::HashMap;

use kubesched_model::Node;
use kubesched_model::topology::region_and_zone;

pub use kubesched_model::topology::{LABEL_REGION, LABEL_REGION_BETA, LABEL_ZONE, LABEL_ZONE_BETA};

/// The zone key of a node: region and zone joined with a separator that cannot occur in
/// label values, or "" when the node has neither label.
pub fn zone_key(node: &Node) -> String {
    match region_and_zone(&node.labels) {
        // A NUL byte cannot appear in a label value, so distinct pairs give distinct keys.
        Some((region, zone)) => format!("{region}:\0:{zone}"),
        None => String::new(),
    }
}

/// Node names per zone, zones in the order they were first seen.
#[derive(Debug, Default, Clone)]
pub struct NodeTree {
    zones: Vec<String>,
    tree: HashMap<String, Vec<String>>,
    num_nodes: usize,
}

impl NodeTree {
    /// Number of nodes in the tree.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Adds a node under its zone; a node already there is left alone.
    pub fn add(&mut self, node: &Node) {
        let zone = zone_key(node);
        match self.tree.get_mut(&zone) {
            Some(names) => {
                if names.contains(&node.name) {
                    tracing::debug!(node = %node.name, "node already in the node tree");
                    return;
                }
                names.push(node.name.clone());
            }
            None => {
                self.zones.push(zone.clone());
                self.tree.insert(zone, vec![node.name.clone()]);
            }
        }
        self.num_nodes += 1;
    }

    /// Removes a node from its zone; false when it was not there.
    pub fn remove(&mut self, node: &Node) -> bool {
        let zone = zone_key(node);
        let Some(names) = self.tree.get_mut(&zone) else {
            return false;
        };
        let Some(i) = names.iter().position(|n| *n == node.name) else {
            return false;
        };
        names.remove(i);
        if names.is_empty() {
            self.tree.remove(&zone);
            self.zones.retain(|z| *z != zone);
        }
        self.num_nodes -= 1;
        true
    }

    /// Moves a node to its new zone when the zone changed. Returns whether the tree changed.
    pub fn update(&mut self, old: &Node, new: &Node) -> bool {
        if zone_key(old) == zone_key(new) {
            return false;
        }
        self.remove(old);
        self.add(new);
        true
    }

    /// Every node: the first node of each zone, then the second of each, and so on.
    pub fn list(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.num_nodes);
        let longest = self.tree.values().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            for zone in &self.zones {
                if let Some(name) = self.tree.get(zone).and_then(|names| names.get(i)) {
                    out.push(name.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_testing::NodeBuilder;

    fn node(name: &str, region: &str, zone: &str) -> Node {
        let mut b = NodeBuilder::new(name);
        if !region.is_empty() {
            b = b.label(LABEL_REGION, region);
        }
        if !zone.is_empty() {
            b = b.zone(zone);
        }
        (*b.model()).clone()
    }

    #[test]
    fn lists_zones_round_robin() {
        let mut t = NodeTree::default();
        for (n, r, z) in [
            ("a1", "r", "a"),
            ("a2", "r", "a"),
            ("a3", "r", "a"),
            ("b1", "r", "b"),
            ("c1", "r", "c"),
            ("c2", "r", "c"),
            ("none", "", ""),
        ] {
            t.add(&node(n, r, z));
        }
        assert_eq!(t.num_nodes(), 7);
        assert_eq!(
            t.list(),
            ["a1", "b1", "c1", "none", "a2", "c2", "a3"].map(String::from)
        );
    }

    #[test]
    fn add_is_idempotent_and_remove_drops_empty_zones() {
        let mut t = NodeTree::default();
        t.add(&node("a1", "r", "a"));
        t.add(&node("a1", "r", "a"));
        t.add(&node("b1", "r", "b"));
        assert_eq!(t.num_nodes(), 2);
        assert!(t.remove(&node("a1", "r", "a")));
        assert!(!t.remove(&node("a1", "r", "a")));
        assert_eq!(t.list(), ["b1"].map(String::from));
        t.add(&node("a2", "r", "a"));
        // Zone "a" was dropped when it emptied, so it now comes after "b".
        assert_eq!(t.list(), ["b1", "a2"].map(String::from));
    }

    #[test]
    fn zone_change_moves_the_node() {
        let mut t = NodeTree::default();
        t.add(&node("x", "r", "a"));
        t.add(&node("y", "r", "a"));
        assert!(!t.update(&node("x", "r", "a"), &node("x", "r", "a")));
        assert!(t.update(&node("x", "r", "a"), &node("x", "r", "b")));
        assert_eq!(t.num_nodes(), 2);
        assert_eq!(t.list(), ["y", "x"].map(String::from));
    }

    #[test]
    fn zone_key_reads_beta_labels_and_keeps_region_apart() {
        let beta = (*NodeBuilder::new("n")
            .label(LABEL_ZONE_BETA, "z")
            .label(LABEL_REGION_BETA, "r")
            .model())
        .clone();
        assert_eq!(zone_key(&beta), zone_key(&node("m", "r", "z")));
        assert_ne!(
            zone_key(&node("m", "r1", "z")),
            zone_key(&node("m", "r2", "z"))
        );
        assert_eq!(zone_key(&node("m", "", "")), "");
    }
}
