//! The nominator: which pods are nominated to run on which node after preemption.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kubesched_model::PodInfo;
use parking_lot::{Mutex, RwLock};
use rustc_hash::FxBuildHasher;

/// Pod lists by node name, as the views hold them.
type ByNode = HashMap<String, Vec<Arc<PodInfo>>, FxBuildHasher>;

#[derive(Debug, Default)]
struct Nominations {
    by_node: HashMap<String, Vec<Arc<PodInfo>>>,
    node_of: HashMap<String, String>,
    /// Nodes whose pod list changed since the shared base of the views was built.
    changed: HashSet<String, FxBuildHasher>,
}

/// The nominations at one moment, read without a lock: a scheduling cycle takes one
/// ([`Nominator::view`]) and looks every node up in it, where asking the nominator would
/// take its lock, hash the node name with SipHash and copy the pod list once per node.
///
/// A view is a base shared by the views that follow it plus the nodes changed since that
/// base was built, so a new view after a change copies the changed nodes only; the base is
/// rebuilt once the changes outnumber a fraction of it.
#[derive(Debug, Default)]
pub struct NominatedView {
    base: Arc<ByNode>,
    /// Nodes changed since `base`, with their pods now (empty when none are left).
    recent: ByNode,
    /// Whether no pod is nominated anywhere.
    empty: bool,
}

impl NominatedView {
    /// The pods nominated to a node (empty when none).
    pub fn pods_for_node(&self, node: &str) -> &[Arc<PodInfo>] {
        if self.empty {
            return &[];
        }
        if !self.recent.is_empty()
            && let Some(pods) = self.recent.get(node)
        {
            return pods;
        }
        self.base.get(node).map_or(&[], Vec::as_slice)
    }

    /// Whether no pod is nominated anywhere.
    pub fn is_empty(&self) -> bool {
        self.empty
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
    /// The base of the views: the nominations when it was built (see [`NominatedView`]).
    base: Mutex<Arc<ByNode>>,
}

/// Changed nodes kept beside a base before it is rebuilt: an eighth of its nodes (and a
/// few more while it is small), so a view costs O(changes) and a rebuild is amortised
/// over that many changes.
fn rebuild_base(changed: usize, base: usize) -> bool {
    changed > 16 + base / 8
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
            if !n.changed.contains(&node) {
                n.changed.insert(node.clone());
            }
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
            n.changed.insert(node);
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
        if let Some(v) = self.view.lock().as_ref() {
            return Arc::clone(v);
        }
        // The write lock: a rebuilt base forgets the changed nodes. Writers (which hold it
        // while they drop the view) cannot change the nominations between the build and
        // the store.
        let mut n = self.inner.write();
        let mut cached = self.view.lock();
        if let Some(v) = cached.as_ref() {
            return Arc::clone(v);
        }
        let mut base = self.base.lock();
        let pods_of = |node: &String| {
            (
                node.clone(),
                n.by_node.get(node).cloned().unwrap_or_default(),
            )
        };
        let recent: ByNode = if rebuild_base(n.changed.len(), base.len()) {
            *base = Arc::new(
                n.by_node
                    .iter()
                    .map(|(node, pods)| (node.clone(), pods.clone()))
                    .collect(),
            );
            n.changed.clear();
            ByNode::default()
        } else {
            n.changed.iter().map(pods_of).collect()
        };
        let v = Arc::new(NominatedView {
            base: Arc::clone(&base),
            recent,
            empty: n.node_of.is_empty(),
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
