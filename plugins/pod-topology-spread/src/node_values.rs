//! Each node's value of one topology key, found by the node's generation instead of a
//! walk of its label map.
//!
//! PreScore and Score read a candidate's topology value once per node and constraint.
//! Through `Node::labels` that is a `BTreeMap` of `String`s: a root node and a key string
//! per comparison, in memory no other plugin touched since Filter. (Filter reads the
//! labels directly: there the label maps are still warm on a quiet machine, and the map
//! lookup measured slower.) A `NodeInfo`'s generation is process-wide unique to one
//! version of one node (every change, a new `Node` with new labels included, takes a
//! fresh number, and a clone keeps its source's), so a generation stands for one fixed
//! label map: a hash map from generation to value, kept beside the counts of PreScore's
//! tally over the snapshot's nodes, answers the same as the labels. A node it does not
//! know (a changed copy, a node outside the snapshot) is looked up in its labels as
//! before. The map is sharded so that a cycle's view shares all of it but the shards
//! changed since.

use std::cell::RefCell;
use std::sync::Arc;

use kubesched_framework::model::{Node, NodeInfo};
use rustc_hash::FxHashMap;

/// Nodes' values of the key by generation (None: the node lacks the key), for the
/// generations of one shard.
type Shard = FxHashMap<u64, Option<Arc<str>>>;

/// The map is split into this many shards, each shared with the views handed out until
/// it changes: a changed node copies one small shard, not the whole map, so the views
/// that cycles still hold (binding cycles keep their state) pin little.
const SHARDS: usize = 128;

/// A node's shard, from its `Node` object: kept by every version of the node that did
/// not change the object itself (pods come and go), so a node's old and new entries are
/// in one shard. Which shard is only where to look: the generation decides.
fn shard_of(node: &Node) -> usize {
    let address = std::ptr::from_ref(node) as usize as u64;
    // The top bits of a multiplicative hash.
    (address.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// The running total of a tally keyed by one topology key: every node's value of that
/// key by generation, and the view handed to cycles.
#[derive(Debug, Default)]
pub(crate) struct KeyValues {
    /// Exact: the tally's nodes, nothing else. Empty until the first node comes.
    shards: Vec<Arc<Shard>>,
    /// Values shared by the nodes that carry them, with how many do.
    interned: FxHashMap<Arc<str>, usize>,
    /// The shards as last handed out; None once one moved.
    view: RefCell<Option<Arc<[Arc<Shard>]>>>,
}

impl KeyValues {
    /// The tally's fold: adds (`sign` 1) or takes out (-1) one node's value of `key`.
    pub(crate) fn fold(&mut self, info: &NodeInfo, key: &str, sign: i64) {
        let generation = info.generation;
        let Some(node) = info.node().filter(|_| generation != 0) else {
            return;
        };
        if self.shards.is_empty() {
            self.shards = (0..SHARDS).map(|_| Arc::default()).collect();
        }
        *self.view.get_mut() = None;
        let Some(shard) = self.shards.get_mut(shard_of(node)) else {
            return;
        };
        let shard = Arc::make_mut(shard);
        if sign < 0 {
            if let Some(Some(value)) = shard.remove(&generation)
                && let Some(n) = self.interned.get_mut(&value)
            {
                *n -= 1;
                if *n == 0 {
                    self.interned.remove(&value);
                }
            }
            return;
        }
        let value = node.labels.get(key).map(|v| {
            let shared: Arc<str> = match self.interned.get_key_value(v.as_str()) {
                Some((shared, _)) => Arc::clone(shared),
                None => Arc::from(v.as_str()),
            };
            *self.interned.entry(Arc::clone(&shared)).or_insert(0) += 1;
            shared
        });
        shard.insert(generation, value);
    }

    /// What a cycle reads: the values as they are now, never changed afterwards.
    pub(crate) fn view(&self) -> ValuesView {
        let mut view = self.view.borrow_mut();
        let shards = view.get_or_insert_with(|| self.shards.iter().cloned().collect());
        ValuesView {
            shards: Arc::clone(shards),
        }
    }
}

/// One topology key's values as a cycle sees them.
#[derive(Debug, Clone)]
pub(crate) struct ValuesView {
    shards: Arc<[Arc<Shard>]>,
}

impl Default for ValuesView {
    fn default() -> Self {
        Self {
            shards: Arc::new([]),
        }
    }
}

impl ValuesView {
    /// The node's value of `key` (the key this view was made for); None when the node
    /// lacks it. Nodes the view does not know are read from their labels.
    pub(crate) fn get<'a>(&'a self, info: &NodeInfo, node: &'a Node, key: &str) -> Option<&'a str> {
        let generation = info.generation;
        if generation != 0
            && let Some(value) = self
                .shards
                .get(shard_of(node))
                .and_then(|shard| shard.get(&generation))
        {
            return value.as_deref();
        }
        node.labels.get(key).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_testing::{NodeBuilder, node_info};

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn node(name: &str, zone: Option<&str>) -> Arc<NodeInfo> {
        let b = NodeBuilder::new(name);
        node_info(zone.map_or(b.clone(), |z| b.label(ZONE, z)), &[])
    }

    /// What the labels say, for comparison.
    fn from_labels(info: &NodeInfo) -> Option<String> {
        info.node().and_then(|n| n.labels.get(ZONE).cloned())
    }

    fn read(view: &ValuesView, info: &NodeInfo) -> Option<String> {
        let n = info.node().expect("node");
        view.get(info, n, ZONE).map(str::to_string)
    }

    #[test]
    fn views_answer_as_the_labels_through_changes() {
        let mut values = KeyValues::default();
        let mut nodes: Vec<_> = (0..300)
            .map(|i| {
                node(
                    &format!("n{i}"),
                    (i % 7 != 0).then(|| ["a", "b", "c"][i % 3]),
                )
            })
            .collect();
        for n in &nodes {
            values.fold(n, ZONE, 1);
        }
        let first = values.view();
        for n in &nodes {
            assert_eq!(read(&first, n), from_labels(n));
        }
        // Relabel nodes one at a time; a view taken earlier keeps answering for the
        // nodes it knew.
        for i in 0..200 {
            let k = (i * 7) % nodes.len();
            let moved = node(&format!("n{k}"), Some(["x", "y"][i % 2]));
            values.fold(&nodes[k], ZONE, -1);
            values.fold(&moved, ZONE, 1);
            nodes[k] = moved;
            let view = values.view();
            assert_eq!(read(&view, &nodes[k]), from_labels(&nodes[k]));
        }
        let last = values.view();
        for n in &nodes {
            assert_eq!(read(&last, n), from_labels(n));
            assert_eq!(read(&first, n), from_labels(n));
        }
        // Exactly the current nodes are kept; values are shared between the nodes that
        // carry them.
        assert!(values.interned.len() <= 5);
        assert_eq!(
            values.shards.iter().map(|s| s.len()).sum::<usize>(),
            nodes.len()
        );
        assert_eq!(
            values.interned.values().sum::<usize>(),
            nodes.iter().filter(|n| from_labels(n).is_some()).count()
        );
    }

    #[test]
    fn unknown_nodes_are_read_from_their_labels() {
        let mut values = KeyValues::default();
        let known = node("n1", Some("a"));
        values.fold(&known, ZONE, 1);
        let view = values.view();
        // A changed copy has a fresh generation the view never saw.
        let mut copy = (*known).clone();
        copy.set_node(node("n1", Some("b")).node().expect("node").clone());
        assert_eq!(read(&view, &copy), Some("b".to_string()));
        // An unchanged copy keeps the generation, and the labels that go with it.
        let same = (*known).clone();
        assert_eq!(read(&view, &same), Some("a".to_string()));
        assert_eq!(read(&ValuesView::default(), &known), Some("a".to_string()));
        // Taken out, a node is no longer known by the next view.
        values.fold(&known, ZONE, -1);
        assert!(values.shards.iter().all(|s| s.is_empty()));
        assert!(values.interned.is_empty());
    }
}
