//! The nominator: which pods are nominated to run on which node after preemption.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kubesched_model::PodInfo;
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxBuildHasher;

#[derive(Debug, Default)]
struct Nominations {
    by_node: HashMap<String, Vec<Arc<PodInfo>>>,
    node_of: HashMap<String, String>,
}

/// The nominations at one moment, read without a lock: a scheduling cycle takes one
/// ([`Nominator::view`]) and looks every node up in it, where asking the nominator would
/// take its lock, hash the node name with SipHash and copy the pod list once per node.
#[derive(Debug, Default)]
pub struct NominatedView {
    by_node: HashMap<String, Vec<Arc<PodInfo>>, FxBuildHasher>,
}

impl NominatedView {
    /// The pods nominated to a node (empty when none).
    pub fn pods_for_node(&self, node: &str) -> &[Arc<PodInfo>] {
        if self.by_node.is_empty() {
            return &[];
        }
        self.by_node.get(node).map_or(&[], Vec::as_slice)
    }

    /// Whether no pod is nominated anywhere.
    pub fn is_empty(&self) -> bool {
        self.by_node.is_empty()
    }
}

/// Nominated pods by node, shared by the queue (which keeps it in step with pod updates,
/// deletes and binds) and by plugins (which read it through the handle).
#[derive(Debug, Default)]
pub struct Nominator {
    inner: RwLock<Nominations>,
    /// How many pods are nominated, kept beside the lock: Filter asks "any at all?" for
    /// every node from several threads, and a plain load shares the cache line where
    /// taking the read lock would bounce it between cores.
    nominated: AtomicUsize,
    /// The last view handed out, dropped by every change so the next reader builds a
    /// fresh one.
    view: Mutex<Option<Arc<NominatedView>>>,
}

impl Nominator {
    /// An empty nominator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Nominates the pod to `node` (or to its `nominatedNodeName` when `node` is None),
    /// replacing any earlier nomination. A pod already bound is never nominated.
    pub fn add(&self, pod: Arc<PodInfo>, node: Option<&str>) {
        let node = node
            .map(str::to_string)
            .or_else(|| pod.nominated_node_name.clone());
        let mut n = self.inner.write();
        Self::remove_locked(&mut n, &pod.uid);
        if let Some(node) = node.filter(|_| pod.node_name.is_none()) {
            n.node_of.insert(pod.uid.clone(), node.clone());
            n.by_node.entry(node).or_default().push(pod);
        }
        self.nominated.store(n.node_of.len(), Ordering::Release);
        *self.view.lock() = None;
    }

    fn remove_locked(n: &mut Nominations, uid: &str) {
        if let Some(node) = n.node_of.remove(uid)
            && let Some(pods) = n.by_node.get_mut(&node)
        {
            pods.retain(|p| p.uid != uid);
            if pods.is_empty() {
                n.by_node.remove(&node);
            }
        }
    }

    /// Drops the pod's nomination, if any.
    pub fn remove(&self, uid: &str) {
        let mut n = self.inner.write();
        Self::remove_locked(&mut n, uid);
        self.nominated.store(n.node_of.len(), Ordering::Release);
        *self.view.lock() = None;
    }

    /// The pods nominated to a node.
    pub fn pods_for_node(&self, node: &str) -> Vec<Arc<PodInfo>> {
        self.inner
            .read()
            .by_node
            .get(node)
            .cloned()
            .unwrap_or_default()
    }

    /// The nominations as they are now, shared until the next change.
    pub fn view(&self) -> Arc<NominatedView> {
        let n = self.inner.read();
        // Taken under the read lock: a writer (which holds the write lock while it drops
        // the view) cannot change the nominations between the build and the store.
        let mut cached = self.view.lock();
        if let Some(v) = cached.as_ref() {
            return Arc::clone(v);
        }
        let v = Arc::new(NominatedView {
            by_node: n
                .by_node
                .iter()
                .map(|(node, pods)| (node.clone(), pods.clone()))
                .collect(),
        });
        *cached = Some(Arc::clone(&v));
        v
    }

    /// The node a pod is nominated to.
    pub fn node_of(&self, uid: &str) -> Option<String> {
        self.inner.read().node_of.get(uid).cloned()
    }

    /// Whether any pod is nominated anywhere.
    pub fn is_empty(&self) -> bool {
        self.nominated.load(Ordering::Acquire) == 0
    }
}
