//! Each node's value of one topology key, found by the node's generation instead of a
//! walk of its label map.
//!
//! Filter and Score read a node's topology value once per node and constraint. Through
//! `Node::labels` that is a `BTreeMap` of `String`s: a root node and a key string per
//! comparison, all in memory no other plugin touched, which made the lookup most of
//! Filter's cost. A `NodeInfo`'s generation is process-wide unique to one version of one
//! node (every change, a new `Node` with new labels included, takes a fresh number, and a
//! clone keeps its source's), so a generation stands for one fixed label map: a hash map
//! from generation to value, kept beside PreFilter's counts over the snapshot's nodes, answers the
//! same as the labels. A node it does not know (a copy a preemption dry run changed, a
//! node outside the snapshot) is looked up in its labels as before.

use std::cell::RefCell;
use std::sync::Arc;

use kubesched_framework::model::{Node, NodeInfo};
use rustc_hash::FxHashMap;

/// A node's value of the key by generation (None: the node lacks the key).
type ByGeneration = FxHashMap<u64, Option<Arc<str>>>;

/// Entries changed since the base map was last rebuilt that a view copies; past this
/// many the base is rebuilt instead.
const RECENT_MAX: usize = 128;

/// The running total of a `NodeTally<(), KeyValues>` keyed by one topology key: every
/// node's value of that key by generation, and the views handed to cycles.
#[derive(Debug, Default)]
pub(crate) struct KeyValues(RefCell<Inner>);

#[derive(Debug, Default)]
struct Inner {
    /// Exact: the tally's nodes, nothing else.
    current: ByGeneration,
    /// Entries added since `base` was built (a subset of `current`).
    recent: ByGeneration,
    /// Values shared by the nodes that carry them, with how many do.
    interned: FxHashMap<Arc<str>, usize>,
    /// `current` as of the last rebuild; may hold entries of nodes gone since, which
    /// still answer right for their generation.
    base: Arc<ByGeneration>,
    /// `recent` as last handed out; None once `recent` moved.
    recent_view: Option<Arc<ByGeneration>>,
}

impl KeyValues {
    /// The tally's fold: adds (`sign` 1) or takes out (-1) one node's value of `key`.
    pub(crate) fn fold(&mut self, info: &NodeInfo, key: &str, sign: i64) {
        let inner = self.0.get_mut();
        let generation = info.generation;
        let Some(node) = info.node().filter(|_| generation != 0) else {
            return;
        };
        if sign < 0 {
            if let Some(Some(value)) = inner.current.remove(&generation)
                && let Some(n) = inner.interned.get_mut(&value)
            {
                *n -= 1;
                if *n == 0 {
                    inner.interned.remove(&value);
                }
            }
            if inner.recent.remove(&generation).is_some() {
                inner.recent_view = None;
            }
            return;
        }
        let value = node.labels.get(key).map(|v| {
            let shared: Arc<str> = match inner.interned.get_key_value(v.as_str()) {
                Some((shared, _)) => Arc::clone(shared),
                None => Arc::from(v.as_str()),
            };
            *inner.interned.entry(Arc::clone(&shared)).or_insert(0) += 1;
            shared
        });
        inner.current.insert(generation, value.clone());
        inner.recent.insert(generation, value);
        inner.recent_view = None;
    }

    /// What a cycle reads: the values as they are now, never changed afterwards.
    pub(crate) fn view(&self) -> ValuesView {
        let mut inner = self.0.borrow_mut();
        let inner = &mut *inner;
        if inner.recent.len() > RECENT_MAX {
            inner.base = Arc::new(inner.current.clone());
            // A fresh map: a cleared one keeps its capacity, and views copy all of it.
            inner.recent = ByGeneration::default();
            inner.recent_view = None;
        }
        let recent = inner
            .recent_view
            .get_or_insert_with(|| Arc::new(inner.recent.clone()));
        ValuesView {
            base: Arc::clone(&inner.base),
            recent: Arc::clone(recent),
        }
    }
}

/// One topology key's values as a cycle sees them.
#[derive(Debug, Clone, Default)]
pub(crate) struct ValuesView {
    base: Arc<ByGeneration>,
    recent: Arc<ByGeneration>,
}

impl ValuesView {
    /// The node's value of `key` (the key this view was made for); None when the node
    /// lacks it. Nodes the view does not know are read from their labels.
    pub(crate) fn get<'a>(&'a self, info: &NodeInfo, node: &'a Node, key: &str) -> Option<&'a str> {
        let generation = info.generation;
        if generation != 0
            && let Some(value) = self
                .recent
                .get(&generation)
                .or_else(|| self.base.get(&generation))
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
    fn views_answer_as_the_labels_through_changes_and_rebuilds() {
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
        // Relabel nodes one at a time, past the point where the base is rebuilt; a view
        // taken earlier keeps answering for the nodes it knew.
        for i in 0..(RECENT_MAX + 40) {
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
        }
        // Values are shared between the nodes that carry them.
        let inner = values.0.borrow();
        assert!(inner.interned.len() <= 5);
        assert_eq!(inner.current.len(), nodes.len());
        assert_eq!(
            inner.interned.values().sum::<usize>(),
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
        assert!(values.0.borrow().current.is_empty());
    }
}
