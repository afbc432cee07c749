//! The scheduler cache: every node with the pods bound or assumed to it, kept exact under
//! every sequence of cluster events and scheduling decisions, and the source of the
//! per-cycle [`Snapshot`].
//!
//! It owns the pod state machine of upstream kube-scheduler's cache
//! (`Initial → Assumed → Added`, with `Expired` and `Deleted` as the ways out), the node
//! tree that lists nodes zone by zone, the image states (which nodes have an image, and its
//! size) and the incremental snapshot update. It must not decide where pods go, hold its
//! lock while plugins run, or talk to the cluster: callers feed it events and read
//! snapshots.
//!
//! # Pod states
//!
//! * [`Cache::assume_pod`] puts a pod the scheduler chose a node for on that node at once, so
//!   the next cycles see its resources taken (Initial → Assumed).
//! * [`Cache::finish_binding`] marks the binding as sent and starts the expiry clock.
//! * [`Cache::forget_pod`] undoes an assumption when the pod failed after it (Assumed → gone).
//! * [`Cache::add_pod`] is the bound pod observed in the cluster: it confirms an assumed pod
//!   (moving it when it was bound elsewhere), re-adds a pod whose assumption expired, or
//!   adds a pod the scheduler never saw (→ Added).
//! * [`Cache::update_pod`] / [`Cache::remove_pod`] follow an added pod (Added → Deleted).
//! * [`Cache::cleanup_expired_assumed_pods`] drops assumed pods whose binding finished more
//!   than the TTL ago without the bound pod showing up (Assumed → Expired). A TTL of zero,
//!   upstream's default, never expires.
//!
//! # Nodes
//!
//! A node removed while pods still point at it stays as a placeholder (a `NodeInfo` without
//! a node object) until its last pod goes, because pod and node events arrive on different
//! streams; placeholders never appear in snapshots. Pods may also arrive before their node:
//! they wait on a placeholder too.
//!
//! # Snapshots
//!
//! Every change of a `NodeInfo` gives it a fresh generation; the cache indexes nodes by
//! generation (the equivalent of upstream's most-recently-updated-first list), so
//! [`Cache::update_snapshot`] visits only the nodes changed since the snapshot's generation.
//! Node infos are shared by `Arc` between the cache and snapshots and copied on write: the
//! first change of a node after a snapshot took it clones it once, so a snapshot update costs
//! O(changed nodes). The node list and the affinity lists are rebuilt only when nodes were
//! added, removed or moved between zones, or when a node starts or stops having pods with
//! (anti-)affinity; otherwise changed nodes are replaced in place. Image summaries
//! (`ImageStateSummary { size, num_nodes }`) are current at snapshot time: when an image
//! appears on or disappears from a node, every node holding that image is refreshed.

mod node_tree;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kubesched_framework::Snapshot;
use kubesched_framework::clock::Clock;
use kubesched_model::{
    ImageStateSummary, ImageStates, Node, NodeInfo, PodInfo, Resource, next_generation,
};
use parking_lot::Mutex;

pub use node_tree::{LABEL_REGION, LABEL_REGION_BETA, LABEL_ZONE, LABEL_ZONE_BETA, zone_key};

/// A cache operation that does not fit the pod's or node's current state. Messages follow
/// upstream's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheError {
    /// `assume_pod` of a pod the cache already has.
    #[error("pod {pod}({uid}) is in the cache, so can't be assumed")]
    AlreadyInCache {
        /// `namespace/name`.
        pod: String,
        /// UID.
        uid: String,
    },
    /// `add_pod` of a pod already added (not assumed).
    #[error("pod {pod}({uid}) was already in added state")]
    AlreadyAdded {
        /// `namespace/name`.
        pod: String,
        /// UID.
        uid: String,
    },
    /// `update_pod` of a pod the cache does not have.
    #[error("pod {pod}({uid}) is not added to scheduler cache, so cannot be updated")]
    NotAdded {
        /// `namespace/name`.
        pod: String,
        /// UID.
        uid: String,
    },
    /// `update_pod` of an assumed pod: it must be confirmed by `add_pod` first.
    #[error("assumed pod {pod}({uid}) should not be updated")]
    AssumedPodUpdated {
        /// `namespace/name`.
        pod: String,
        /// UID.
        uid: String,
    },
    /// `remove_pod` of a pod the cache does not have.
    #[error("pod {pod}({uid}) is not found in scheduler cache, so cannot be removed from it")]
    PodNotFound {
        /// `namespace/name`.
        pod: String,
        /// UID.
        uid: String,
    },
    /// `forget_pod` of a pod that is added, not assumed.
    #[error("pod {pod}({uid}) is not assumed, so it cannot be removed or forgotten")]
    NotAssumed {
        /// `namespace/name`.
        pod: String,
        /// UID.
        uid: String,
    },
    /// The event names another node than the cache has for the pod (node names of bound
    /// pods never change, so the event stream is inconsistent). Nothing was changed.
    #[error("pod {pod}({uid}) is on node {cached:?} in the cache but the event says {event:?}")]
    NodeMismatch {
        /// `namespace/name`.
        pod: String,
        /// UID.
        uid: String,
        /// The node in the cache.
        cached: String,
        /// The node in the event.
        event: String,
    },
    /// A pod given to the cache names no node.
    #[error("Pod {pod}: spec.nodeName: a pod added to the cache must name its node")]
    NoNodeName {
        /// `namespace/name`.
        pod: String,
    },
    /// `remove_node` of a node the cache does not have (or only as a placeholder).
    #[error("node {0} is not found")]
    NodeNotFound(String),
    /// The snapshot does not list exactly the nodes of the node tree (a bug); the lists were
    /// rebuilt for the next cycle.
    #[error(
        "snapshot state is not consistent, length of NodeInfoList={list} not equal to length of nodes in tree={tree}, trying to recover"
    )]
    InconsistentSnapshot {
        /// Nodes in the snapshot.
        list: usize,
        /// Nodes in the tree.
        tree: usize,
    },
}

/// One node in a [`CacheDump`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeDump {
    /// The node's name.
    pub name: String,
    /// True when the node was deleted but pods still point at it.
    pub placeholder: bool,
    /// Pods on the node, `namespace/name`, sorted.
    pub pods: Vec<String>,
    /// Sum of the pods' requests.
    pub requested: Resource,
    /// Sum of the pods' requests with scoring defaults.
    pub non_zero_requested: Resource,
    /// The node's allocatable resources.
    pub allocatable: Resource,
}

/// How much the cache holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheSizes {
    /// Nodes (placeholders of deleted nodes that still hold pods included).
    pub nodes: usize,
    /// Pods, added and assumed.
    pub pods: usize,
    /// Pods assumed and not yet confirmed by the cluster.
    pub assumed_pods: usize,
}

/// The cache's content, for debugging (`kubesched` prints it on demand).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CacheDump {
    /// Every node (placeholders included), sorted by name.
    pub nodes: Vec<NodeDump>,
    /// Assumed pods, `namespace/name`, sorted.
    pub assumed_pods: Vec<String>,
}

#[derive(Debug)]
struct PodState {
    pod: Arc<PodInfo>,
    assumed: bool,
    binding_finished: bool,
    /// When an assumed pod whose binding finished expires (None: never).
    deadline: Option<Instant>,
}

#[derive(Debug)]
struct ImageState {
    size: i64,
    nodes: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct State {
    /// Every node by name, placeholders included.
    nodes: HashMap<String, Arc<NodeInfo>>,
    /// Generation → node name: iterating a range visits the nodes changed since then.
    recency: BTreeMap<u64, String>,
    tree: node_tree::NodeTree,
    /// Generation of the last change of the tree's membership or order.
    tree_generation: u64,
    pods: HashMap<String, PodState>,
    assumed: BTreeSet<String>,
    images: HashMap<String, ImageState>,
    /// Images whose set of nodes changed since the last snapshot update.
    dirty_images: HashSet<String>,
    /// Nodes whose own list of images changed since the last snapshot update.
    dirty_nodes: HashSet<String>,
}

/// The scheduler cache. All methods take `&self`; one internal lock serialises them and is
/// never held while anything outside the cache runs.
#[derive(Debug)]
pub struct Cache {
    inner: Mutex<State>,
    ttl: Duration,
    clock: Arc<dyn Clock>,
}

fn err_pod(pod: &PodInfo) -> (String, String) {
    (pod.key(), pod.uid.clone())
}

impl Cache {
    /// A cache whose assumed pods expire `assumed_pod_ttl` after their binding finished
    /// (zero: never, upstream's default).
    pub fn new(assumed_pod_ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            inner: Mutex::new(State::default()),
            ttl: assumed_pod_ttl,
            clock,
        }
    }

    /// Adds a node, or replaces it when the cache has it.
    pub fn add_node(&self, node: Arc<Node>) {
        self.inner.lock().upsert_node(node);
    }

    /// Replaces a node (adds it when the cache does not have it).
    pub fn update_node(&self, node: Arc<Node>) {
        self.inner.lock().upsert_node(node);
    }

    /// Removes a node. Its pods keep a placeholder until they are removed.
    pub fn remove_node(&self, name: &str) -> Result<(), CacheError> {
        let mut st = self.inner.lock();
        let Some(node) = st.nodes.get(name).and_then(|n| n.node().cloned()) else {
            return Err(CacheError::NodeNotFound(name.to_string()));
        };
        st.mutate_node(name, |info| {
            info.remove_node();
            // A placeholder has no images; they come back with the node, if it does.
            info.image_states.clear();
        });
        st.drop_if_empty_placeholder(name);
        st.tree.remove(&node);
        st.tree_generation = next_generation();
        st.update_images(name, Some(&node), None);
        tracing::debug!(node = name, "node removed from the cache");
        Ok(())
    }

    /// A bound pod observed in the cluster: confirms an assumed pod (moving it when it was
    /// bound to another node than assumed), re-adds a pod whose assumption expired, or adds
    /// a pod the scheduler did not place.
    pub fn add_pod(&self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let node = pod
            .node_name
            .clone()
            .ok_or_else(|| CacheError::NoNodeName { pod: pod.key() })?;
        let mut st = self.inner.lock();
        match st.pods.get(&pod.uid) {
            Some(ps) if ps.assumed => {
                let assumed_node = ps.pod.node_name.clone().unwrap_or_default();
                st.remove_pod_locked(&pod.uid);
                if assumed_node != node {
                    tracing::info!(
                        pod = %pod.key(),
                        assumed_node = %assumed_node,
                        current_node = %node,
                        "pod was added to a different node than it was assumed"
                    );
                }
                st.add_pod_locked(pod, node, false);
                Ok(())
            }
            Some(_) => {
                let (pod, uid) = err_pod(&pod);
                Err(CacheError::AlreadyAdded { pod, uid })
            }
            None => {
                st.add_pod_locked(pod, node, false);
                Ok(())
            }
        }
    }

    /// Replaces an added pod with its new version (same node).
    pub fn update_pod(&self, old: &PodInfo, new: Arc<PodInfo>) -> Result<(), CacheError> {
        let mut st = self.inner.lock();
        let Some(ps) = st.pods.get(&old.uid) else {
            let (pod, uid) = err_pod(old);
            return Err(CacheError::NotAdded { pod, uid });
        };
        if ps.assumed {
            let (pod, uid) = err_pod(old);
            return Err(CacheError::AssumedPodUpdated { pod, uid });
        }
        let cached = ps.pod.node_name.clone().unwrap_or_default();
        if new.node_name.as_deref() != Some(cached.as_str()) {
            let (pod, uid) = err_pod(old);
            tracing::error!(pod = %pod, "pod updated on a different node than previously added to; scheduler cache is corrupted");
            return Err(CacheError::NodeMismatch {
                pod,
                uid,
                cached,
                event: new.node_name.clone().unwrap_or_default(),
            });
        }
        st.remove_pod_locked(&old.uid);
        st.add_pod_locked(new, cached, false);
        Ok(())
    }

    /// Removes a pod (added or assumed). A pod object without a node name is accepted (a
    /// missed delete replayed from a stale copy); one naming another node is refused.
    pub fn remove_pod(&self, pod: &PodInfo) -> Result<(), CacheError> {
        let mut st = self.inner.lock();
        let Some(ps) = st.pods.get(&pod.uid) else {
            let (p, uid) = err_pod(pod);
            return Err(CacheError::PodNotFound { pod: p, uid });
        };
        if let Some(event_node) = &pod.node_name
            && ps.pod.node_name.as_ref() != Some(event_node)
        {
            let (p, uid) = err_pod(pod);
            tracing::error!(pod = %p, "pod removed from a different node than it was added to; scheduler cache is corrupted");
            return Err(CacheError::NodeMismatch {
                pod: p,
                uid,
                cached: ps.pod.node_name.clone().unwrap_or_default(),
                event: event_node.clone(),
            });
        }
        st.remove_pod_locked(&pod.uid);
        Ok(())
    }

    /// Puts a pod on the node the scheduler chose (`pod.node_name`) before it is bound.
    pub fn assume_pod(&self, pod: Arc<PodInfo>) -> Result<(), CacheError> {
        let node = pod
            .node_name
            .clone()
            .ok_or_else(|| CacheError::NoNodeName { pod: pod.key() })?;
        let mut st = self.inner.lock();
        if st.pods.contains_key(&pod.uid) {
            let (p, uid) = err_pod(&pod);
            return Err(CacheError::AlreadyInCache { pod: p, uid });
        }
        st.add_pod_locked(pod, node, true);
        Ok(())
    }

    /// The binding of an assumed pod was sent: its expiry clock starts now. Unknown or
    /// added pods are ignored.
    pub fn finish_binding(&self, uid: &str) -> Result<(), CacheError> {
        let now = self.clock.now();
        let mut st = self.inner.lock();
        if let Some(ps) = st.pods.get_mut(uid).filter(|ps| ps.assumed) {
            ps.binding_finished = true;
            ps.deadline = (!self.ttl.is_zero()).then(|| now + self.ttl);
        }
        Ok(())
    }

    /// Drops an assumed pod (the scheduling or binding cycle failed after assuming it).
    /// A pod the cache no longer has is fine; an added pod is refused.
    pub fn forget_pod(&self, uid: &str) -> Result<(), CacheError> {
        let mut st = self.inner.lock();
        let Some(ps) = st.pods.get(uid) else {
            return Ok(());
        };
        if !ps.assumed {
            let (pod, uid) = err_pod(&ps.pod);
            return Err(CacheError::NotAssumed { pod, uid });
        }
        st.remove_pod_locked(uid);
        Ok(())
    }

    /// Whether the pod is assumed (placed by the scheduler, not yet seen bound).
    pub fn is_assumed_pod(&self, uid: &str) -> bool {
        self.inner.lock().assumed.contains(uid)
    }

    /// The pod as the cache has it, even when its node was deleted.
    pub fn get_pod(&self, uid: &str) -> Option<Arc<PodInfo>> {
        self.inner.lock().pods.get(uid).map(|ps| ps.pod.clone())
    }

    /// Removes assumed pods whose binding finished more than the TTL ago and that were never
    /// confirmed by `add_pod`.
    pub fn cleanup_expired_assumed_pods(&self) {
        if self.ttl.is_zero() {
            return;
        }
        let now = self.clock.now();
        let mut st = self.inner.lock();
        let expired: Vec<String> = st
            .assumed
            .iter()
            .filter(|uid| {
                st.pods
                    .get(*uid)
                    .is_some_and(|ps| ps.binding_finished && ps.deadline.is_some_and(|d| now > d))
            })
            .cloned()
            .collect();
        for uid in expired {
            if let Some(ps) = st.pods.get(&uid) {
                tracing::info!(pod = %ps.pod.key(), "assumed pod expired");
            }
            st.remove_pod_locked(&uid);
        }
    }

    /// Brings `snapshot` up to date with the cache, copying only what changed since the
    /// snapshot's generation. An error means the snapshot was found inconsistent; it has
    /// been rebuilt, but the current cycle should fail.
    pub fn update_snapshot(&self, snapshot: &mut Snapshot) -> Result<(), CacheError> {
        let mut st = self.inner.lock();
        st.refresh_image_summaries();
        let since = snapshot.generation;
        let mut update_all =
            st.tree_generation > since || snapshot.num_nodes() != st.tree.num_nodes();
        if !update_all {
            for name in st.recency.range(since + 1..).map(|(_, n)| n) {
                let Some(info) = st.nodes.get(name).filter(|i| i.node().is_some()) else {
                    continue;
                };
                let Some(old) = snapshot.get(name) else {
                    // A node the snapshot lacks: only a full rebuild puts it in place.
                    update_all = true;
                    break;
                };
                if Arc::ptr_eq(old, info) {
                    continue;
                }
                snapshot.replace(info.clone());
            }
        }
        if update_all {
            snapshot.set_nodes(st.tree_infos());
        }
        let newest = st.recency.last_key_value().map(|(g, _)| *g).unwrap_or(0);
        snapshot.generation = snapshot.generation.max(newest).max(st.tree_generation);
        if snapshot.num_nodes() != st.tree.num_nodes() {
            let err = CacheError::InconsistentSnapshot {
                list: snapshot.num_nodes(),
                tree: st.tree.num_nodes(),
            };
            tracing::error!(error = %err, "rebuilding the snapshot");
            snapshot.set_nodes(st.tree_infos());
            return Err(err);
        }
        Ok(())
    }

    /// Number of nodes, placeholders included.
    pub fn node_count(&self) -> usize {
        self.inner.lock().nodes.len()
    }

    /// Number of pods (added and assumed), on deleted nodes too.
    pub fn pod_count(&self) -> usize {
        self.inner.lock().pods.len()
    }

    /// Nodes, pods and assumed pods, read together (`scheduler_cache_size`).
    pub fn sizes(&self) -> CacheSizes {
        let st = self.inner.lock();
        CacheSizes {
            nodes: st.nodes.len(),
            pods: st.pods.len(),
            assumed_pods: st.assumed.len(),
        }
    }

    /// The cache's content, for debugging.
    pub fn dump(&self) -> CacheDump {
        let st = self.inner.lock();
        let mut nodes: Vec<NodeDump> = st
            .nodes
            .iter()
            .map(|(name, info)| {
                let mut pods: Vec<String> = info.pods.iter().map(|p| p.key()).collect();
                pods.sort();
                NodeDump {
                    name: name.clone(),
                    placeholder: info.node().is_none(),
                    pods,
                    requested: info.requested.clone(),
                    non_zero_requested: info.non_zero_requested.clone(),
                    allocatable: info.allocatable.clone(),
                }
            })
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut assumed_pods: Vec<String> = st
            .assumed
            .iter()
            .filter_map(|uid| st.pods.get(uid).map(|ps| ps.pod.key()))
            .collect();
        assumed_pods.sort();
        CacheDump {
            nodes,
            assumed_pods,
        }
    }
}

impl State {
    /// Runs `f` on a node's info (cloning it first when a snapshot shares it) and keeps the
    /// generation index in step.
    fn mutate_node<R>(&mut self, name: &str, f: impl FnOnce(&mut NodeInfo) -> R) -> Option<R> {
        let entry = self.nodes.get_mut(name)?;
        let info = Arc::make_mut(entry);
        let before = info.generation;
        let out = f(info);
        let after = info.generation;
        if after != before {
            if self.recency.get(&before).is_some_and(|n| n == name) {
                self.recency.remove(&before);
            }
            self.recency.insert(after, name.to_string());
        }
        Some(out)
    }

    fn drop_if_empty_placeholder(&mut self, name: &str) {
        let Some(info) = self.nodes.get(name) else {
            return;
        };
        if info.node().is_none() && info.pods.is_empty() {
            let generation = info.generation;
            if self.recency.get(&generation).is_some_and(|n| n == name) {
                self.recency.remove(&generation);
            }
            self.nodes.remove(name);
        }
    }

    fn add_pod_locked(&mut self, pod: Arc<PodInfo>, node: String, assumed: bool) {
        self.nodes.entry(node.clone()).or_default();
        self.mutate_node(&node, |info| info.add_pod(pod.clone()));
        if assumed {
            self.assumed.insert(pod.uid.clone());
        }
        self.pods.insert(
            pod.uid.clone(),
            PodState {
                pod,
                assumed,
                binding_finished: false,
                deadline: None,
            },
        );
    }

    fn remove_pod_locked(&mut self, uid: &str) {
        let Some(ps) = self.pods.remove(uid) else {
            return;
        };
        self.assumed.remove(uid);
        let node = ps.pod.node_name.clone().unwrap_or_default();
        match self.mutate_node(&node, |info| info.remove_pod(uid)) {
            Some(Some(_)) => self.drop_if_empty_placeholder(&node),
            _ => {
                tracing::error!(pod = %ps.pod.key(), node = %node, "pod not found on its node in the cache")
            }
        }
    }

    fn upsert_node(&mut self, node: Arc<Node>) {
        let name = node.name.clone();
        let old = match self.nodes.get(&name) {
            Some(info) => info.node().cloned(),
            None => {
                self.nodes
                    .insert(name.clone(), Arc::new(NodeInfo::default()));
                None
            }
        };
        let tree_changed = match &old {
            Some(old) => self.tree.update(old, &node),
            None => {
                self.tree.add(&node);
                true
            }
        };
        if tree_changed {
            self.tree_generation = next_generation();
        }
        self.update_images(&name, old.as_deref(), Some(&node));
        self.mutate_node(&name, |info| info.set_node(node));
    }

    /// Records that `node_name` went from the images of `old` to those of `new`.
    fn update_images(&mut self, node_name: &str, old: Option<&Node>, new: Option<&Node>) {
        let names = |n: Option<&Node>| -> HashMap<String, i64> {
            n.into_iter()
                .flat_map(|n| n.images.iter())
                .flat_map(|(names, size)| names.iter().map(move |name| (name.clone(), *size)))
                .collect()
        };
        let before = names(old);
        let after = names(new);
        if before.len() != after.len() || before.keys().any(|n| !after.contains_key(n)) {
            self.dirty_nodes.insert(node_name.to_string());
        }
        for name in before.keys().filter(|n| !after.contains_key(*n)) {
            if let Some(state) = self.images.get_mut(name) {
                state.nodes.remove(node_name);
                if state.nodes.is_empty() {
                    self.images.remove(name);
                }
                self.dirty_images.insert(name.clone());
            }
        }
        for (name, size) in after.into_iter().filter(|(n, _)| !before.contains_key(n)) {
            // Like upstream, the size first reported for an image name is kept.
            let state = self.images.entry(name.clone()).or_insert(ImageState {
                size,
                nodes: BTreeSet::new(),
            });
            state.nodes.insert(node_name.to_string());
            self.dirty_images.insert(name);
        }
    }

    /// The image summaries of a node, from the current image states.
    fn image_summaries(&self, node: &Node) -> ImageStates {
        node.images
            .iter()
            .flat_map(|(names, _)| names.iter())
            .filter_map(|name| {
                self.images.get(name).map(|s| {
                    (
                        name.clone(),
                        ImageStateSummary {
                            size: s.size,
                            num_nodes: s.nodes.len(),
                        },
                    )
                })
            })
            .collect()
    }

    /// Refreshes the summaries of every node that holds an image whose spread changed, giving
    /// those nodes a new generation so snapshots pick them up.
    fn refresh_image_summaries(&mut self) {
        if self.dirty_images.is_empty() && self.dirty_nodes.is_empty() {
            return;
        }
        let mut touched: BTreeSet<String> = self.dirty_nodes.drain().collect();
        for image in std::mem::take(&mut self.dirty_images) {
            if let Some(state) = self.images.get(&image) {
                touched.extend(state.nodes.iter().cloned());
            }
        }
        for name in touched {
            let Some(node) = self.nodes.get(&name).and_then(|i| i.node().cloned()) else {
                continue;
            };
            let summaries = self.image_summaries(&node);
            if self.nodes.get(&name).map(|i| &i.image_states) == Some(&summaries) {
                continue;
            }
            self.mutate_node(&name, |info| {
                info.image_states = summaries;
                info.generation = next_generation();
            });
        }
    }

    /// The infos of the nodes in the tree, in tree order.
    fn tree_infos(&self) -> Vec<Arc<NodeInfo>> {
        self.tree
            .list()
            .iter()
            .filter_map(|n| self.nodes.get(n).cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests;
