//! `Node` (a node's compiled view) and `NodeInfo` (a node with the pods on it and their sums).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1 as api;

use crate::pod::PodInfo;
use crate::selector::{FlatLabels, LabelSelector, Labels};
use crate::taint::Taint;
use crate::{HostPortInfo, ModelError, Resource};

/// A node as the scheduler sees it. Built once per node update.
#[derive(Debug, Clone)]
pub struct Node {
    /// The API object.
    pub node: Arc<api::Node>,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: Labels,
    /// The same labels packed for per-node matching (NodeAffinity's Filter and Score).
    pub flat_labels: FlatLabels,
    /// Taints.
    pub taints: Vec<Taint>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// `status.allocatable` (falls back to capacity when allocatable is absent).
    pub allocatable: Resource,
    /// Images present on the node: every name of the image, and its size in bytes.
    pub images: Vec<(Vec<String>, i64)>,
    /// `status.declaredFeatures`: the features the node's kubelet declares (KEP-5328),
    /// sorted and de-duplicated here so lookups need not trust the object's order.
    pub declared_features: Vec<String>,
}

impl Node {
    /// Compiles a node. It fails only for a node without a name; a taint or an amount that
    /// cannot be read is left out (and logged), so the node stays in the scheduler's view.
    pub fn new(node: Arc<api::Node>) -> Result<Self, ModelError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        let object = format!("Node {name}");
        Self::build(node, name).map_err(|e| e.in_object(&object))
    }

    fn build(node: Arc<api::Node>, name: String) -> Result<Self, ModelError> {
        if name.is_empty() {
            return Err(ModelError::invalid("metadata.name", "a node needs a name"));
        }
        let spec = node.spec.clone().unwrap_or_default();
        let mut taints = Vec::new();
        for (i, t) in spec.taints.iter().flatten().enumerate() {
            // A taint whose effect upstream does not know repels no pod there either.
            match Taint::compile(t, &format!("spec.taints[{i}]")) {
                Ok(t) => taints.push(t),
                Err(e) => tracing::debug!(node = %name, error = %e, "ignoring a taint"),
            }
        }
        let status = node.status.clone().unwrap_or_default();
        // An amount that cannot be read is left out: the node offers none of it.
        let mut problems = Vec::new();
        let allocatable = match (&status.allocatable, &status.capacity) {
            (Some(a), _) => Resource::from_list_lenient(a, "status.allocatable", &mut problems),
            (None, Some(c)) => Resource::from_list_lenient(c, "status.capacity", &mut problems),
            (None, None) => Resource::default(),
        };
        for e in problems {
            tracing::warn!(node = %name, error = %e, "leaving out an allocatable amount that cannot be read");
        }
        let images = status
            .images
            .iter()
            .flatten()
            .map(|i| {
                (
                    i.names.clone().unwrap_or_default(),
                    i.size_bytes.unwrap_or(0),
                )
            })
            .collect();
        let mut declared_features = status.declared_features.clone().unwrap_or_default();
        declared_features.sort_unstable();
        declared_features.dedup();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        Ok(Self {
            declared_features,
            flat_labels: FlatLabels::new(&labels),
            labels,
            unschedulable: spec.unschedulable.unwrap_or(false),
            taints,
            allocatable,
            images,
            name,
            node,
        })
    }
}

/// A node's images by every name it reports them under. ImageLocality looks up each of a
/// pod's images on every node it scores, so the hash is the fast unkeyed one. Each map holds
/// only its own node's report (the kubelet sends 50 images by default), so names crafted to
/// collide can slow only that node's lookups.
pub type ImageStates = rustc_hash::FxHashMap<String, ImageStateSummary>;

/// How widely an image is spread, as ImageLocality needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ImageStateSummary {
    /// Size of the image in bytes.
    pub size: i64,
    /// Number of nodes that have the image.
    pub num_nodes: usize,
}

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// A fresh, process-wide increasing generation number.
pub fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed) + 1
}

/// A sum [`NodeInfo`] keeps in step with the copy of its numbers at the head of the info
/// ([`NodeInfo::numbers`], [`NodeInfo::pod_count`]): read it as the value inside; only
/// `NodeInfo`'s own methods change it. It is not `Clone` on purpose, so that `.clone()`
/// on it gives the value inside, ready to be changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Kept<T>(T);

impl<T> Deref for Kept<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'a, T> IntoIterator for &'a Kept<Vec<T>> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// The numbers Filter and Score read of every node they examine (NodeResourcesFit,
/// NodeResourcesBalancedAllocation), copied from the node's full sums into two cache lines
/// at the head of [`NodeInfo`]. Scalar resources are not here: they stay in the full sums.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeNumbers {
    /// Allocatable CPU in millicores.
    pub allocatable_milli_cpu: i64,
    /// Allocatable memory in bytes.
    pub allocatable_memory: i64,
    /// Allocatable ephemeral storage in bytes.
    pub allocatable_ephemeral_storage: i64,
    /// Pods the node admits.
    pub allowed_pod_number: i64,
    /// CPU the pods on the node request, in millicores.
    pub requested_milli_cpu: i64,
    /// Memory the pods on the node request, in bytes.
    pub requested_memory: i64,
    /// Ephemeral storage the pods on the node request, in bytes.
    pub requested_ephemeral_storage: i64,
    /// CPU requested with the scoring defaults for containers that ask for none.
    pub non_zero_milli_cpu: i64,
    /// Memory requested with the scoring defaults for containers that ask for none.
    pub non_zero_memory: i64,
}

impl NodeNumbers {
    /// The numbers of a node with `allocatable` and no pods (what a node event offers).
    pub fn empty_node(allocatable: &Resource) -> Self {
        Self::from_sums(allocatable, &Resource::default(), &Resource::default())
    }

    fn from_sums(allocatable: &Resource, requested: &Resource, non_zero: &Resource) -> Self {
        Self {
            allocatable_milli_cpu: allocatable.milli_cpu,
            allocatable_memory: allocatable.memory,
            allocatable_ephemeral_storage: allocatable.ephemeral_storage,
            allowed_pod_number: allocatable.allowed_pod_number,
            requested_milli_cpu: requested.milli_cpu,
            requested_memory: requested.memory,
            requested_ephemeral_storage: requested.ephemeral_storage,
            non_zero_milli_cpu: non_zero.milli_cpu,
            non_zero_memory: non_zero.memory,
        }
    }
}

/// A node and the pods on it, with sums kept exact on every add and remove.
///
/// The layout is C's, in declaration order, on purpose: what Filter and Score read for
/// every node examined (the node pointer, the flags copied from it, the pod count and the
/// [`NodeNumbers`]) comes first, 88 bytes that share two cache lines with the `Arc`'s
/// counts when the allocation falls well. Everything after is read only for pods that
/// need it (ports, affinity, scalar resources, images). Left to the compiler, these fields
/// were spread over the whole struct, and each pass paid a miss on lines it read only one
/// word of.
#[derive(Debug, Default)]
#[repr(C)]
pub struct NodeInfo {
    node: Option<Arc<Node>>,
    /// The node's `spec.unschedulable`, copied here so Filter reads it without touching the
    /// `Node` (a second allocation, a cache miss per node examined).
    node_unschedulable: bool,
    /// Whether the node has any taint, copied here for the same reason.
    node_has_taints: bool,
    /// Whether the node reports any image, so ImageLocality reads `image_states` only then.
    node_has_images: bool,
    /// `pods.len()`, in what would be padding, so NodeResourcesFit leaves `pods` unread.
    pod_count: u32,
    /// `allocatable`, `requested` and `non_zero_requested` in two cache lines.
    numbers: NodeNumbers,
    /// Pods on the node (bound or assumed).
    pub pods: Kept<Vec<Arc<PodInfo>>>,
    /// The node's own images with their spread (filled by the cache): empty when the node
    /// reports none.
    pub image_states: ImageStates,
    /// Sum of the pods' requests.
    pub requested: Kept<Resource>,
    /// Sum of the pods' requests with scoring defaults.
    pub non_zero_requested: Kept<Resource>,
    /// The node's allocatable resources.
    pub allocatable: Kept<Resource>,
    /// Host ports in use.
    pub used_ports: HostPortInfo,
    /// Pods with any pod affinity or anti-affinity term.
    pub pods_with_affinity: Vec<Arc<PodInfo>>,
    /// Pods with a required anti-affinity term.
    pub pods_with_required_anti_affinity: Vec<Arc<PodInfo>>,
    /// How many pods on the node use each PVC (`namespace/claim`).
    pub pvc_ref_counts: HashMap<String, u32>,
    /// Bumped on every change; snapshots copy only nodes whose generation moved.
    pub generation: u64,
}

// By hand because `Kept` is not `Clone` (see there).
impl Clone for NodeInfo {
    fn clone(&self) -> Self {
        Self {
            node: self.node.clone(),
            node_unschedulable: self.node_unschedulable,
            node_has_taints: self.node_has_taints,
            node_has_images: self.node_has_images,
            pod_count: self.pod_count,
            numbers: self.numbers,
            pods: Kept(self.pods.0.clone()),
            image_states: self.image_states.clone(),
            requested: Kept(self.requested.0.clone()),
            non_zero_requested: Kept(self.non_zero_requested.0.clone()),
            allocatable: Kept(self.allocatable.0.clone()),
            used_ports: self.used_ports.clone(),
            pods_with_affinity: self.pods_with_affinity.clone(),
            pods_with_required_anti_affinity: self.pods_with_required_anti_affinity.clone(),
            pvc_ref_counts: self.pvc_ref_counts.clone(),
            generation: self.generation,
        }
    }
}

impl NodeInfo {
    /// Pods on the node in `namespace` that `selector` matches, terminating ones aside: the
    /// per-node count the spreading plugins sum. A selector without requirements counts
    /// nothing (upstream's spreading treats it as selecting no pod).
    pub fn count_matching_pods(&self, namespace: &str, selector: &LabelSelector) -> i64 {
        if selector.requirements.is_empty() {
            return 0;
        }
        self.pods
            .iter()
            .filter(|p| !p.terminating && p.namespace == namespace && selector.matches(&p.labels))
            .count() as i64
    }

    /// An info for a node with no pods yet.
    pub fn new(node: Arc<Node>) -> Self {
        let mut info = Self::default();
        info.set_node(node);
        info
    }

    /// The node, or None for a placeholder kept while pods still point at a deleted node.
    #[inline]
    pub fn node(&self) -> Option<&Arc<Node>> {
        self.node.as_ref()
    }

    /// Whether the node object is there (false for a placeholder), without touching it.
    #[inline]
    pub fn has_node(&self) -> bool {
        self.node.is_some()
    }

    /// The node's `spec.unschedulable` (false for a placeholder), without touching the node.
    #[inline]
    pub fn node_unschedulable(&self) -> bool {
        self.node_unschedulable
    }

    /// Whether the node has any taint (false for a placeholder), without touching the node.
    #[inline]
    pub fn node_has_taints(&self) -> bool {
        self.node_has_taints
    }

    /// The node's numbers Filter and Score read (see [`NodeNumbers`]).
    #[inline]
    pub fn numbers(&self) -> &NodeNumbers {
        &self.numbers
    }

    /// How many pods are on the node, without touching `pods`.
    #[inline]
    pub fn pod_count(&self) -> usize {
        self.pod_count as usize
    }

    /// Whether the node reports any image (false for a placeholder), without touching the
    /// node or `image_states`.
    #[inline]
    pub fn node_has_images(&self) -> bool {
        self.node_has_images
    }

    /// The node's name, or "" for a placeholder.
    #[inline]
    pub fn name(&self) -> &str {
        self.node.as_ref().map(|n| n.name.as_str()).unwrap_or("")
    }

    /// Sets or replaces the node object.
    pub fn set_node(&mut self, node: Arc<Node>) {
        self.allocatable.0 = node.allocatable.clone();
        self.refresh_numbers();
        self.node_unschedulable = node.unschedulable;
        self.node_has_taints = !node.taints.is_empty();
        self.node_has_images = !node.images.is_empty();
        self.node = Some(node);
        self.generation = next_generation();
    }

    /// Drops the node object, keeping the pods (the node was deleted before its pods).
    pub fn remove_node(&mut self) {
        self.node = None;
        self.node_unschedulable = false;
        self.node_has_taints = false;
        self.node_has_images = false;
        self.generation = next_generation();
    }

    /// Adds a pod and its requests, ports and claims.
    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.0.add(&pod.requests);
        self.non_zero_requested.0.milli_cpu += pod.non_zero_requests.milli_cpu;
        self.non_zero_requested.0.memory += pod.non_zero_requests.memory;
        for p in &pod.host_ports {
            self.used_ports.add(p);
        }
        for c in &pod.pvc_names {
            *self
                .pvc_ref_counts
                .entry(format!("{}/{}", pod.namespace, c))
                .or_insert(0) += 1;
        }
        if pod.has_affinity() {
            self.pods_with_affinity.push(pod.clone());
        }
        if pod.has_required_anti_affinity() {
            self.pods_with_required_anti_affinity.push(pod.clone());
        }
        self.pods.0.push(pod);
        self.refresh_numbers();
        self.generation = next_generation();
    }

    /// Removes the pod with this UID; returns it, or None when it was not here.
    pub fn remove_pod(&mut self, uid: &str) -> Option<Arc<PodInfo>> {
        let i = self.pods.iter().position(|p| p.uid == uid)?;
        let pod = self.pods.0.swap_remove(i);
        self.pods_with_affinity.retain(|p| p.uid != uid);
        self.pods_with_required_anti_affinity
            .retain(|p| p.uid != uid);
        self.requested.0.sub(&pod.requests);
        self.requested.0.scalar.retain(|_, v| *v != 0);
        self.non_zero_requested.0.milli_cpu -= pod.non_zero_requests.milli_cpu;
        self.non_zero_requested.0.memory -= pod.non_zero_requests.memory;
        self.refresh_numbers();
        for p in &pod.host_ports {
            self.used_ports.remove(p);
        }
        for c in &pod.pvc_names {
            let key = format!("{}/{}", pod.namespace, c);
            if let Some(n) = self.pvc_ref_counts.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.pvc_ref_counts.remove(&key);
                }
            }
        }
        self.generation = next_generation();
        Some(pod)
    }

    /// Copies the sums into the head of the info: every method that changes them calls it.
    fn refresh_numbers(&mut self) {
        self.numbers =
            NodeNumbers::from_sums(&self.allocatable, &self.requested, &self.non_zero_requested);
        // More than 4 billion pods on a node is not a thing; saturate rather than wrap.
        self.pod_count = u32::try_from(self.pods.len()).unwrap_or(u32::MAX);
    }

    /// Whether a pod with this UID is on the node.
    pub fn has_pod(&self, uid: &str) -> bool {
        self.pods.iter().any(|p| p.uid == uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use std::collections::BTreeMap;

    fn pod(name: &str, cpu: &str, port: Option<i32>) -> Arc<PodInfo> {
        let container = api::Container {
            name: "c".into(),
            resources: Some(api::ResourceRequirements {
                requests: Some(BTreeMap::from([("cpu".to_string(), Q(cpu.into()))])),
                ..Default::default()
            }),
            ports: port.map(|p| {
                vec![api::ContainerPort {
                    container_port: p,
                    host_port: Some(p),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        };
        let p = api::Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(name.into()),
                ..Default::default()
            },
            spec: Some(api::PodSpec {
                containers: vec![container],
                ..Default::default()
            }),
            ..Default::default()
        };
        Arc::new(PodInfo::new(Arc::new(p)).unwrap())
    }

    fn node(spec: api::NodeSpec) -> Arc<Node> {
        let n = api::Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            spec: Some(spec),
            ..Default::default()
        };
        Arc::new(Node::new(Arc::new(n)).unwrap())
    }

    #[test]
    fn flags_follow_the_node_object() {
        let mut info = NodeInfo::default();
        assert!(!info.has_node() && !info.node_unschedulable() && !info.node_has_taints());
        info.set_node(node(api::NodeSpec {
            unschedulable: Some(true),
            taints: Some(vec![api::Taint {
                key: "k".into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }));
        assert!(info.has_node() && info.node_unschedulable() && info.node_has_taints());
        info.set_node(node(api::NodeSpec::default()));
        assert!(info.has_node() && !info.node_unschedulable() && !info.node_has_taints());
        info.set_node(node(api::NodeSpec {
            unschedulable: Some(true),
            ..Default::default()
        }));
        info.remove_node();
        assert!(!info.has_node() && !info.node_unschedulable() && !info.node_has_taints());
    }

    #[test]
    fn add_and_remove_keep_sums_exact() {
        let mut info = NodeInfo::default();
        let g0 = info.generation;
        info.add_pod(pod("a", "100m", Some(80)));
        info.add_pod(pod("b", "250m", None));
        assert_eq!(info.requested.milli_cpu, 350);
        assert_eq!(
            info.non_zero_requested.memory,
            2 * crate::resource::DEFAULT_MEMORY_REQUEST
        );
        assert_eq!(info.used_ports.len(), 1);
        assert!(info.generation > g0);
        assert!(info.remove_pod("a").is_some());
        assert!(info.remove_pod("a").is_none());
        assert_eq!(info.requested.milli_cpu, 250);
        assert!(info.used_ports.is_empty());
        assert_eq!(info.pods.len(), 1);
    }

    #[test]
    fn images_flag_follows_the_node_object() {
        let mut info = NodeInfo::default();
        assert!(!info.node_has_images());
        let mut n = node(api::NodeSpec::default());
        Arc::make_mut(&mut n).images = vec![(vec!["nginx:1.27".into()], 1 << 20)];
        info.set_node(n);
        assert!(info.node_has_images());
        info.set_node(node(api::NodeSpec::default()));
        assert!(!info.node_has_images());
        info.remove_node();
        assert!(!info.node_has_images());
    }

    #[test]
    fn numbers_follow_the_sums() {
        let want = |info: &NodeInfo| NodeNumbers {
            allocatable_milli_cpu: info.allocatable.milli_cpu,
            allocatable_memory: info.allocatable.memory,
            allocatable_ephemeral_storage: info.allocatable.ephemeral_storage,
            allowed_pod_number: info.allocatable.allowed_pod_number,
            requested_milli_cpu: info.requested.milli_cpu,
            requested_memory: info.requested.memory,
            requested_ephemeral_storage: info.requested.ephemeral_storage,
            non_zero_milli_cpu: info.non_zero_requested.milli_cpu,
            non_zero_memory: info.non_zero_requested.memory,
        };
        let check = |info: &NodeInfo| {
            assert_eq!(*info.numbers(), want(info));
            assert_eq!(info.pod_count(), info.pods.len());
            let copy = info.clone();
            assert_eq!(*copy.numbers(), want(&copy));
            assert_eq!(copy.pod_count(), copy.pods.len());
        };
        let mut info = NodeInfo::default();
        check(&info);
        let mut n = node(api::NodeSpec::default());
        Arc::make_mut(&mut n).allocatable = Resource {
            milli_cpu: 4000,
            memory: 1 << 30,
            ephemeral_storage: 7,
            allowed_pod_number: 110,
            ..Default::default()
        };
        info.set_node(n);
        check(&info);
        info.add_pod(pod("a", "100m", None));
        info.add_pod(pod("b", "250m", None));
        check(&info);
        assert_eq!(info.numbers().requested_milli_cpu, 350);
        info.remove_pod("a");
        check(&info);
        info.remove_node();
        check(&info);
        assert_eq!(info.pod_count(), 1);
    }
}
