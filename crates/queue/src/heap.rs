//! A binary heap of queued pods keyed by UID, so pods can be found, updated and removed in
//! O(log n). The ordering is passed to each call, because it comes from a plugin (activeQ)
//! or from the clock-free backoff arithmetic (backoffQ).

use std::collections::HashMap;

use kubesched_framework::QueuedPodInfo;

/// "Goes before" relation of a heap.
pub(crate) type Less<'a> = &'a dyn Fn(&QueuedPodInfo, &QueuedPodInfo) -> bool;

/// Entries that the ordering ties (same priority, same timestamp: common when a simulation
/// adds many pods at one virtual instant) leave in the order they were pushed, so the
/// queue is first-in first-out among equals and runs are reproducible.
#[derive(Debug, Default)]
pub(crate) struct PodHeap {
    items: Vec<QueuedPodInfo>,
    seqs: Vec<u64>,
    next_seq: u64,
    index: HashMap<String, usize>,
}

impl PodHeap {
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.index.contains_key(uid)
    }

    pub(crate) fn get(&self, uid: &str) -> Option<&QueuedPodInfo> {
        self.index.get(uid).map(|&i| &self.items[i])
    }

    pub(crate) fn peek(&self) -> Option<&QueuedPodInfo> {
        self.items.first()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &QueuedPodInfo> {
        self.items.iter()
    }

    /// Adds the pod, or replaces the entry with the same UID.
    pub(crate) fn push(&mut self, item: QueuedPodInfo, less: Less<'_>) {
        let uid = item.pod_info.uid.clone();
        if let Some(&i) = self.index.get(&uid) {
            self.items[i] = item;
            self.fix(i, less);
            return;
        }
        self.items.push(item);
        self.seqs.push(self.next_seq);
        self.next_seq += 1;
        let i = self.items.len() - 1;
        self.index.insert(uid, i);
        self.up(i, less);
    }

    pub(crate) fn pop(&mut self, less: Less<'_>) -> Option<QueuedPodInfo> {
        if self.items.is_empty() {
            return None;
        }
        self.remove_at(0, less)
    }

    pub(crate) fn remove(&mut self, uid: &str, less: Less<'_>) -> Option<QueuedPodInfo> {
        let i = *self.index.get(uid)?;
        self.remove_at(i, less)
    }

    /// Changes an entry in place and restores the heap order.
    pub(crate) fn update(
        &mut self,
        uid: &str,
        less: Less<'_>,
        f: impl FnOnce(&mut QueuedPodInfo),
    ) -> bool {
        let Some(&i) = self.index.get(uid) else {
            return false;
        };
        f(&mut self.items[i]);
        self.fix(i, less);
        true
    }

    fn remove_at(&mut self, i: usize, less: Less<'_>) -> Option<QueuedPodInfo> {
        let last = self.items.len() - 1;
        self.swap(i, last);
        let item = self.items.pop()?;
        self.seqs.pop();
        self.index.remove(&item.pod_info.uid);
        if i < self.items.len() {
            self.fix(i, less);
        }
        Some(item)
    }

    fn swap(&mut self, a: usize, b: usize) {
        if a == b {
            return;
        }
        self.items.swap(a, b);
        self.seqs.swap(a, b);
        self.index.insert(self.items[a].pod_info.uid.clone(), a);
        self.index.insert(self.items[b].pod_info.uid.clone(), b);
    }

    /// Whether entry `i` goes before entry `j`: by the ordering, then by push order.
    fn before(&self, i: usize, j: usize, less: Less<'_>) -> bool {
        let (a, b) = (&self.items[i], &self.items[j]);
        less(a, b) || (!less(b, a) && self.seqs[i] < self.seqs[j])
    }

    fn fix(&mut self, i: usize, less: Less<'_>) {
        if !self.up(i, less) {
            self.down(i, less);
        }
    }

    /// Moves an entry towards the root while it goes before its parent; true if it moved.
    fn up(&mut self, mut i: usize, less: Less<'_>) -> bool {
        let start = i;
        while i > 0 {
            let parent = (i - 1) / 2;
            if !self.before(i, parent, less) {
                break;
            }
            self.swap(i, parent);
            i = parent;
        }
        i != start
    }

    fn down(&mut self, mut i: usize, less: Less<'_>) {
        let n = self.items.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let child = if right < n && self.before(right, left, less) {
                right
            } else {
                left
            };
            if !self.before(child, i, less) {
                break;
            }
            self.swap(i, child);
            i = child;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubesched_testing::PodBuilder;
    use std::time::Instant;

    fn qpi(name: &str, priority: i32) -> QueuedPodInfo {
        QueuedPodInfo::new(
            PodBuilder::new(name).priority(priority).info(),
            Instant::now(),
        )
    }

    fn by_priority(a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        a.pod_info.priority > b.pod_info.priority
    }

    #[test]
    fn pops_in_order_and_supports_remove_and_update() {
        let mut h = PodHeap::default();
        for (i, p) in [5, 1, 9, 3, 7, 2, 8].iter().enumerate() {
            h.push(qpi(&format!("p{i}"), *p), &by_priority);
        }
        assert_eq!(h.len(), 7);
        assert_eq!(
            h.remove("p2", &by_priority).map(|q| q.pod_info.priority),
            Some(9)
        );
        assert!(h.update("p1", &by_priority, |q| {
            q.pod_info = PodBuilder::new("p1").priority(100).info();
        }));
        // Re-pushing an existing UID replaces it.
        h.push(qpi("p0", 0), &by_priority);
        let order: Vec<i32> = std::iter::from_fn(|| h.pop(&by_priority))
            .map(|q| q.pod_info.priority)
            .collect();
        assert_eq!(order, [100, 8, 7, 3, 2, 0]);
        assert!(h.peek().is_none());
        assert!(!h.contains("p1"));
    }
}

#[cfg(test)]
mod fifo_tests {
    use super::*;
    use kubesched_testing::PodBuilder;
    use std::time::Instant;

    #[test]
    fn equal_entries_pop_in_push_order() {
        let now = Instant::now();
        let less = |a: &QueuedPodInfo, b: &QueuedPodInfo| a.pod_info.priority > b.pod_info.priority;
        let mut h = PodHeap::default();
        for name in ["a", "b", "c", "d", "e", "f", "g"] {
            h.push(QueuedPodInfo::new(PodBuilder::new(name).info(), now), &less);
        }
        h.push(
            QueuedPodInfo::new(PodBuilder::new("urgent").priority(5).info(), now),
            &less,
        );
        let order: Vec<String> = std::iter::from_fn(|| h.pop(&less))
            .map(|q| q.pod_info.name.clone())
            .collect();
        assert_eq!(order, ["urgent", "a", "b", "c", "d", "e", "f", "g"]);
    }
}
