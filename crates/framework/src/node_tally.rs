//! Per-node results that outlive one scheduling cycle, recomputed only where a node changed.
//!
//! PreFilter and PreScore of the topology plugins sum something over every pod of every
//! node once per cycle. Between two cycles usually one node changed (the pod just
//! assumed), so re-reading every pod of 5000 nodes (cold memory, one pointer chase per
//! label) repeats work whose answer is already known. A [`NodeTally`] keeps the value it
//! computed for each node together with the `Arc<NodeInfo>` it read: snapshot nodes are
//! copy-on-write, so an identical pointer means an identical node, and keeping the `Arc`
//! alive means its address cannot be reused by another node. Only changed positions are
//! recomputed, and the running total is corrected by removing the old value and adding
//! the new one. The answer is the same as a fresh pass over the nodes.

use std::sync::Arc;

use kubesched_model::NodeInfo;
use parking_lot::Mutex;

use crate::Parallelizer;

/// A tally not used in this many calls of its cache is dropped.
pub const IDLE_CALLS: u64 = 256;

/// Below this many changed nodes, recomputation runs on the calling thread.
const MIN_PARALLEL_CHANGES: usize = 256;

/// Per-node values of one function over a node list, and their running total.
#[derive(Debug)]
pub struct NodeTally<V, T> {
    nodes: Vec<Arc<NodeInfo>>,
    values: Vec<V>,
    total: T,
}

impl<V, T: Default> Default for NodeTally<V, T> {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            values: Vec::new(),
            total: T::default(),
        }
    }
}

impl<V: Send, T> NodeTally<V, T> {
    /// Brings the tally in line with `nodes`: `compute` runs for every position whose node
    /// is not the one read last time, and `fold(total, node, value, sign)` takes each old
    /// value out (sign -1, with the node it was computed from) and puts each new one in
    /// (sign +1). `compute` must depend only on the node and on what the caller keyed
    /// this tally by. Returns how many positions were recomputed.
    pub fn refresh<C, F>(
        &mut self,
        nodes: &[Arc<NodeInfo>],
        parallelizer: &Parallelizer,
        compute: C,
        mut fold: F,
    ) -> usize
    where
        C: Fn(&NodeInfo) -> V + Sync + Send,
        F: FnMut(&mut T, &NodeInfo, &V, i64),
    {
        let old_len = self.nodes.len();
        let changed: Vec<usize> = (0..old_len.max(nodes.len()))
            .filter(|&i| match (self.nodes.get(i), nodes.get(i)) {
                (Some(old), Some(new)) => !Arc::ptr_eq(old, new),
                _ => true,
            })
            .collect();
        if changed.is_empty() {
            return 0;
        }
        let arriving: Vec<usize> = changed
            .iter()
            .copied()
            .filter(|&i| i < nodes.len())
            .collect();
        let fresh: Vec<V> = if arriving.len() >= MIN_PARALLEL_CHANGES {
            parallelizer.map(arriving.len(), |k| compute(&nodes[arriving[k]]))
        } else {
            arriving.iter().map(|&i| compute(&nodes[i])).collect()
        };
        let mut fresh = fresh.into_iter();
        for &i in &changed {
            if i < old_len {
                fold(&mut self.total, &self.nodes[i], &self.values[i], -1);
            }
            if i < nodes.len() {
                let Some(value) = fresh.next() else {
                    break;
                };
                fold(&mut self.total, &nodes[i], &value, 1);
                if i < old_len {
                    self.nodes[i] = Arc::clone(&nodes[i]);
                    self.values[i] = value;
                } else {
                    self.nodes.push(Arc::clone(&nodes[i]));
                    self.values.push(value);
                }
            }
        }
        self.nodes.truncate(nodes.len());
        self.values.truncate(nodes.len());
        changed.len()
    }

    /// The running total.
    pub fn total(&self) -> &T {
        &self.total
    }

    /// The per-node values, aligned with the nodes of the last refresh.
    pub fn values(&self) -> &[V] {
        &self.values
    }
}

/// A few tallies kept by a plugin, keyed by what their function depends on besides the
/// node (the incoming pod's selector, namespace, terms...). Pods of one workload share
/// their key, so a handful of slots covers the common case; the least recently used slot
/// makes room for a new key. A tally holds the node objects it read, so one left unused
/// for [`IDLE_CALLS`] calls is dropped rather than keep old copies of the cluster alive.
#[derive(Debug)]
pub struct TallyCache<K, V, T> {
    slots: Mutex<Vec<Slot<K, V, T>>>,
    capacity: usize,
}

#[derive(Debug)]
struct Slot<K, V, T> {
    key: K,
    tally: NodeTally<V, T>,
    last_used: u64,
}

impl<K: PartialEq, V: Send, T: Default> TallyCache<K, V, T> {
    /// A cache of at most `capacity` tallies (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            slots: Mutex::new(Vec::new()),
            capacity: capacity.max(1),
        }
    }

    /// Runs `f` on the tally kept for `key`, starting an empty one when there is none.
    /// Calls for one cache are serialised.
    pub fn with<R>(&self, key: K, f: impl FnOnce(&mut NodeTally<V, T>) -> R) -> R {
        let mut slots = self.slots.lock();
        let tick = slots.iter().map(|s| s.last_used).max().unwrap_or(0) + 1;
        slots.retain(|s| tick - s.last_used <= IDLE_CALLS);
        let index = match slots.iter().position(|s| s.key == key) {
            Some(i) => i,
            None => {
                let slot = Slot {
                    key,
                    tally: NodeTally::default(),
                    last_used: tick,
                };
                if slots.len() < self.capacity {
                    slots.push(slot);
                    slots.len() - 1
                } else {
                    let oldest = slots
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, s)| s.last_used)
                        .map_or(0, |(i, _)| i);
                    slots[oldest] = slot;
                    oldest
                }
            }
        };
        slots[index].last_used = tick;
        f(&mut slots[index].tally)
    }

    /// Forgets every tally (their nodes are released).
    pub fn clear(&self) {
        self.slots.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_testing::{NodeBuilder, PodBuilder, node_info};

    fn node(name: &str, pods: usize) -> Arc<NodeInfo> {
        let pods: Vec<_> = (0..pods)
            .map(|i| PodBuilder::new(&format!("{name}-{i}")).info())
            .collect();
        node_info(NodeBuilder::new(name), &pods)
    }

    fn pods_per_node(tally: &mut NodeTally<usize, usize>, nodes: &[Arc<NodeInfo>]) -> usize {
        tally.refresh(
            nodes,
            &Parallelizer::default(),
            |n| n.pods.len(),
            |total, _, v, sign| {
                *total = (*total as i64 + sign * *v as i64) as usize;
            },
        )
    }

    #[test]
    fn only_changed_nodes_are_recomputed_and_the_total_stays_exact() {
        let mut nodes: Vec<_> = (0..5).map(|i| node(&format!("n{i}"), i)).collect();
        let mut tally = NodeTally::default();
        assert_eq!(pods_per_node(&mut tally, &nodes), 5);
        assert_eq!(*tally.total(), 10);
        assert_eq!(pods_per_node(&mut tally, &nodes), 0);
        nodes[2] = node("n2", 7);
        assert_eq!(pods_per_node(&mut tally, &nodes), 1);
        assert_eq!(*tally.total(), 15);
        // Shrinking takes the dropped nodes out; growing adds the new ones.
        nodes.truncate(3);
        assert_eq!(pods_per_node(&mut tally, &nodes), 2);
        assert_eq!(*tally.total(), 8);
        nodes.push(node("n9", 4));
        assert_eq!(pods_per_node(&mut tally, &nodes), 1);
        assert_eq!((*tally.total(), tally.values()), (12, &[0, 1, 7, 4][..]));
    }

    #[test]
    fn a_reordered_list_gives_the_same_total_as_a_fresh_pass() {
        let nodes: Vec<_> = (0..300).map(|i| node(&format!("n{i}"), i % 4)).collect();
        let mut tally = NodeTally::default();
        pods_per_node(&mut tally, &nodes);
        let mut reversed = nodes.clone();
        reversed.reverse();
        let parallel = Parallelizer::new(2);
        tally.refresh(
            &reversed,
            &parallel,
            |n| n.pods.len(),
            |total, _, v, sign| *total = (*total as i64 + sign * *v as i64) as usize,
        );
        let expected: usize = reversed.iter().map(|n| n.pods.len()).sum();
        assert_eq!(*tally.total(), expected);
        let by_position: Vec<usize> = reversed.iter().map(|n| n.pods.len()).collect();
        assert_eq!(tally.values(), &by_position[..]);
    }

    #[test]
    fn the_cache_keeps_a_tally_per_key_and_evicts_the_least_recently_used() {
        let cache: TallyCache<&str, usize, usize> = TallyCache::new(2);
        let nodes = vec![node("a", 1), node("b", 2)];
        let run = |key| cache.with(key, |t| pods_per_node(t, &nodes));
        assert_eq!(run("x"), 2);
        assert_eq!(run("y"), 2);
        assert_eq!(run("x"), 0, "x is kept");
        assert_eq!(run("z"), 2, "z evicts y, the least recently used");
        assert_eq!(run("x"), 0);
        assert_eq!(run("y"), 2, "y was evicted");
        cache.clear();
        assert_eq!(run("x"), 2);
    }

    #[test]
    fn an_idle_tally_is_dropped() {
        let cache: TallyCache<u64, usize, usize> = TallyCache::new(2);
        let nodes = vec![node("a", 1)];
        let run = |key| cache.with(key, |t| pods_per_node(t, &nodes));
        assert_eq!(run(0), 1);
        // Key 1 is used over and over, key 0 sits idle until it is dropped.
        for _ in 1..IDLE_CALLS {
            run(1);
        }
        assert_eq!(run(0), 0, "kept: used again within IDLE_CALLS calls");
        for _ in 0..IDLE_CALLS {
            run(1);
        }
        assert_eq!(run(0), 1, "dropped: IDLE_CALLS other calls in between");
    }
}
