//! `NodeToStatus`: why each node was rejected in one scheduling attempt.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{Snapshot, Status};

/// How many of the most recently added distinct statuses a new one is compared with before
/// it is kept as a new one. Rejections of one pass repeat a handful of statuses, usually
/// the same one node after node; a pass that gives every node its own status stays linear.
const RECENT_DISTINCT: usize = 8;

/// No status recorded for a node position.
const NONE: u32 = u32::MAX;

/// The status each node's Filter gave, for PostFilter and failure messages.
///
/// A failed attempt records one status per rejected node, thousands of times the same few
/// rejections: statuses are kept once per distinct value with a count, and nodes are
/// recorded by their position in the snapshot the attempt ran on (names outside that
/// snapshot, or with none given, by name). Lookups by name go through the snapshot's index.
#[derive(Debug, Clone, Default)]
pub struct NodeToStatus {
    /// The snapshot whose node positions `slots` follows.
    snapshot: Option<Arc<Snapshot>>,
    /// Per snapshot position: the index of its status in `distinct`, or `NONE`.
    slots: Vec<u32>,
    /// Nodes recorded by name (not in `snapshot`): the index of their status.
    named: HashMap<String, u32>,
    /// Each distinct status with the number of nodes that have it.
    distinct: Vec<(Status, usize)>,
    /// Nodes recorded, by position or by name.
    len: usize,
    /// The status of nodes not recorded (e.g. all nodes excluded by PreFilter).
    pub absent: Option<Status>,
}

impl NodeToStatus {
    /// Statuses for the nodes of `snapshot`, recorded by position.
    pub fn for_snapshot(snapshot: Arc<Snapshot>) -> Self {
        Self {
            snapshot: Some(snapshot),
            ..Self::default()
        }
    }

    /// Records the status of the node at `position` in the snapshot given to
    /// [`NodeToStatus::for_snapshot`]. A position outside it names no node: nothing is
    /// recorded.
    pub fn set_at(&mut self, position: usize, status: Status) {
        let n = self.snapshot.as_ref().map_or(0, |s| s.num_nodes());
        debug_assert!(
            position < n,
            "node position {position} outside a snapshot of {n}"
        );
        if position >= n {
            return;
        }
        let d = self.intern(status);
        if self.slots.len() < n {
            self.slots.resize(n, NONE);
        }
        let old = std::mem::replace(&mut self.slots[position], d);
        self.forget(old);
    }

    /// Records the status of a node by name.
    pub fn set(&mut self, node: &str, status: Status) {
        if let Some(i) = self.position(node) {
            self.set_at(i, status);
            return;
        }
        let d = self.intern(status);
        let old = self.named.insert(node.to_string(), d).unwrap_or(NONE);
        self.forget(old);
    }

    /// The status of one node: its own, or the absent nodes' one.
    pub fn get(&self, node: &str) -> Option<&Status> {
        self.recorded(node).or(self.absent.as_ref())
    }

    /// The status of the node at `position` of `snapshot`: its own, or the absent nodes'
    /// one. Without a hash of the name when `snapshot` is the one the statuses follow.
    pub fn get_at(&self, snapshot: &Snapshot, position: usize) -> Option<&Status> {
        let same = self
            .snapshot
            .as_deref()
            .is_some_and(|s| std::ptr::eq(s, snapshot));
        if same && self.named.is_empty() {
            let d = self.slots.get(position).copied().unwrap_or(NONE);
            return self.status(d).or(self.absent.as_ref());
        }
        snapshot
            .list()
            .get(position)
            .and_then(|n| self.get(n.name()))
    }

    /// Number of nodes with a status of their own.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no node has a status of its own.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Each distinct status recorded with the number of nodes that have it, in the order
    /// first seen (absent nodes not included).
    pub fn counted(&self) -> impl Iterator<Item = (&Status, usize)> {
        self.distinct
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| (s, *n))
    }

    fn recorded(&self, node: &str) -> Option<&Status> {
        let d = match self.position(node) {
            Some(i) => self.slots.get(i).copied().unwrap_or(NONE),
            None => self.named.get(node).copied().unwrap_or(NONE),
        };
        self.status(d)
    }

    fn position(&self, node: &str) -> Option<usize> {
        self.snapshot.as_ref()?.position(node)
    }

    fn status(&self, d: u32) -> Option<&Status> {
        self.distinct.get(d as usize).map(|(s, _)| s)
    }

    /// The index of `status` among the distinct ones (added when new), counted once more.
    fn intern(&mut self, status: Status) -> u32 {
        self.len += 1;
        let recent = self.distinct.len().saturating_sub(RECENT_DISTINCT);
        if let Some(k) = (recent..self.distinct.len())
            .rev()
            .find(|&k| self.distinct[k].0 == status)
        {
            self.distinct[k].1 += 1;
            return k as u32;
        }
        self.distinct.push((status, 1));
        (self.distinct.len() - 1) as u32
    }

    /// Uncounts a replaced status.
    fn forget(&mut self, d: u32) {
        if let Some((_, n)) = self.distinct.get_mut(d as usize) {
            *n -= 1;
            self.len -= 1;
        }
    }
}
