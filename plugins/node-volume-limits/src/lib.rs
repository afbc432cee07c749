//! NodeVolumeLimits: a node takes no more CSI volumes per driver than its CSINode allows.
//!
//! Upstream kube-scheduler's CSI limits plugin (v1.34): PreFilter skips pods without
//! claims, generic ephemeral volumes or migratable in-tree volumes; Filter counts the unique
//! volumes per driver already on the node (its pods' claims, ephemeral claims and inline
//! volumes, in-tree volumes translated to their CSI driver, and the VolumeAttachments that
//! name the node), adds the pod's new ones and compares with
//! `CSINode.spec.drivers[].allocatable.count`. A volume used by several pods counts once.
//! It only reads the object store; it must not write anything.
//!
//! Counting a node means resolving every claim of every pod on it, so the result is kept
//! per node from one cycle to the next (keyed by the node's generation and the generations
//! of the stores it read) and the pod's own volumes are resolved once per cycle in
//! PreFilter; the answers are those of a fresh count.

mod translate;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use rustc_hash::{FxHashMap, FxHashSet};

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use kubesched_framework::model::k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kubesched_framework::model::storage::claim_class;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, EnqueueExtensions, Feature, FilterPlugin, Handle, ObjectStore, PluginError,
    PreFilterPlugin, PreFilterResult, Status,
};

pub use translate::{CsiVolume, IN_TREE_PLUGINS, InTreePlugin};

/// The plugin's registered name.
pub const NAME: &str = "NodeVolumeLimits";
/// Why a node was rejected: one of its CSI drivers would exceed its attach limit.
pub const ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED: &str = "node(s) exceed max volume count";

/// Why a node was rejected (v1.35+, VolumeLimitScaling): its CSINode does not list a driver
/// of the pod's volumes whose CSIDriver sets `preventPodSchedulingIfMissing`. Upstream's
/// wording, the driver's name first.
pub fn err_reason_driver_missing(driver: &str) -> String {
    format!("{driver} CSI driver is not installed on the node")
}

/// Prefixes the made-up handle of a claim not bound yet, so it collides with no real one.
const UNBOUND_HANDLE_PREFIX: &str = "kubesched-unbound";

/// The NodeVolumeLimits plugin.
#[derive(Debug)]
pub struct NodeVolumeLimits {
    handle: Handle,
    /// VolumeLimitScaling: a driver that opts in (`preventPodSchedulingIfMissing`) must be
    /// registered in the node's CSINode.
    volume_limit_scaling: bool,
    /// The last count of each node, by node name.
    counts: RwLock<FxHashMap<String, Arc<NodeCount>>>,
    /// The attachments by node, with the generations of the attachment and volume stores
    /// they were read at.
    attachments: Mutex<Option<((u64, u64), AttachmentsByNode)>>,
}

impl NodeVolumeLimits {
    /// Builds the plugin; it reads claims, volumes, classes, CSINodes and VolumeAttachments
    /// from the object store.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
            volume_limit_scaling: handle.features().enabled(Feature::VolumeLimitScaling),
            counts: RwLock::default(),
            attachments: Mutex::default(),
        })
    }
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::model::k8s_openapi::api::core::v1 as corev1;
use kubesched_framework::model::k8s_openapi::api::storage::v1 as storagev1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: NodeVolumeLimits,
    kinds: [
        corev1::PersistentVolume,
        corev1::PersistentVolumeClaim,
        storagev1::StorageClass,
        storagev1::CSINode,
        storagev1::CSIDriver,
        storagev1::VolumeAttachment,
    ],
    factory: NodeVolumeLimits::new,
}

/// The volumes attached to each node through VolumeAttachments (`driver/handle` → driver),
/// gathered again only when attachments or volumes change.
#[derive(Debug, Clone, Default)]
struct AttachmentsByNode(Arc<HashMap<String, Vec<(String, String)>>>);

/// The generations of the stores a node's count reads besides the node itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StoreGenerations {
    claims: u64,
    volumes: u64,
    classes: u64,
    csi_nodes: u64,
    attachments: u64,
}

/// What Filter needs to know about one node, kept while the node and the stores it was
/// read from stay the same.
#[derive(Debug)]
struct NodeCount {
    /// The `NodeInfo` generation and pod count it was computed from.
    node_generation: u64,
    pods: usize,
    stores: StoreGenerations,
    has_csi_node: bool,
    /// The drivers the node's CSINode lists (registered on the node).
    drivers: Vec<String>,
    /// Attach limit per driver (empty: nothing is limited, the rest is not computed); a
    /// node has a handful of drivers, so a list is searched.
    limits: Vec<(String, i64)>,
    /// The volumes in use, or the error reading a running pod's volumes.
    in_use: Result<InUse, Status>,
}

/// The volumes in use on a node.
#[derive(Debug, Default)]
struct InUse {
    /// `driver/handle` of the volumes of the pods on the node.
    by_pods: FxHashSet<String>,
    /// Unique volumes per driver: the pods' and those of the node's attachments.
    per_driver: Vec<(String, i64)>,
}

/// The value kept for `driver` in a short per-driver list.
fn for_driver(list: &[(String, i64)], driver: &str) -> Option<i64> {
    list.iter().find(|(d, _)| d == driver).map(|&(_, n)| n)
}

/// The pod's attachable volumes by driver: `(driver, [driver/handle])`.
type VolumesByDriver = Vec<(String, Vec<String>)>;

/// The attachable volumes of the pod being scheduled, resolved once per cycle: with and
/// without a CSINode on the node (in-tree volumes count only with one).
#[derive(Debug, Clone)]
struct PodVolumes {
    with_csi_node: Arc<Result<VolumesByDriver, Status>>,
    without_csi_node: Arc<Result<VolumesByDriver, Status>>,
}

fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[])
}

/// Whether the volume may take an attachment slot of a CSI driver.
fn may_count(v: &Volume) -> bool {
    v.persistent_volume_claim.is_some() || v.ephemeral.is_some() || translate::inline(v).is_some()
}

/// The name of a generic ephemeral volume's claim.
fn ephemeral_claim_name(pod: &Pod, volume: &Volume) -> String {
    format!(
        "{}-{}",
        pod.metadata.name.as_deref().unwrap_or(""),
        volume.name
    )
}

/// Whether upstream counts an in-tree plugin's volumes on this node: migration is on for
/// the counted plugins whenever the node has a CSINode.
fn migration_on(has_csi_node: bool, plugin: InTreePlugin) -> bool {
    has_csi_node && plugin.counted
}

/// The attach limit of each driver of a CSINode.
fn volume_limits(csi_node: Option<&CSINode>) -> HashMap<&str, i64> {
    csi_node
        .map(|n| {
            n.spec
                .drivers
                .iter()
                .filter_map(|d| {
                    let count = d.allocatable.as_ref()?.count?;
                    Some((d.name.as_str(), i64::from(count)))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `driver/handle` → driver, for one set of volumes.
type UniqueVolumes = HashMap<String, String>;

fn unique_name(driver: &str, handle: &str) -> String {
    format!("{driver}/{handle}")
}

impl NodeVolumeLimits {
    fn objects(&self) -> &ObjectStore {
        self.handle.objects()
    }

    /// Whether the driver's CSIDriver asks to keep pods off nodes without it
    /// (`spec.preventPodSchedulingIfMissing`, off when unset or when there is no CSIDriver).
    fn driver_required(&self, driver: &str) -> bool {
        self.objects()
            .csi_drivers
            .get(None, driver)
            .is_some_and(|d| d.spec.prevent_pod_scheduling_if_missing == Some(true))
    }

    /// Adds the attachable volumes of `pod` to `out`. For the pod being scheduled
    /// (`new_pod`) a missing claim is an error; for pods already running it is skipped.
    fn attachable_volumes(
        &self,
        pod: &Pod,
        has_csi_node: bool,
        new_pod: bool,
        out: &mut UniqueVolumes,
    ) -> Result<(), Status> {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        for v in volumes(pod) {
            let (claim, ephemeral) = if let Some(c) = &v.persistent_volume_claim {
                (c.claim_name.clone(), false)
            } else if v.ephemeral.is_some() {
                (ephemeral_claim_name(pod, v), true)
            } else {
                if let Some(inline) = translate::inline(v)
                    && migration_on(has_csi_node, inline.plugin)
                {
                    out.insert(
                        unique_name(inline.plugin.driver, &inline.handle),
                        inline.plugin.driver.to_string(),
                    );
                }
                continue;
            };
            if claim.is_empty() {
                return Err(Status::error("PersistentVolumeClaim had no name"));
            }
            let Some(pvc) = self
                .objects()
                .persistent_volume_claims
                .get(Some(namespace), &claim)
            else {
                if new_pod {
                    return Err(Status::unresolvable(format!(
                        "looking up PVC {namespace}/{claim}: persistentvolumeclaim \"{claim}\" not found"
                    )));
                }
                tracing::trace!(namespace, claim = %claim, "claim of a running pod not found; not counted");
                continue;
            };
            if ephemeral && !claim_is_for_pod(pod, &pvc) {
                return Err(Status::error(format!(
                    "PVC {namespace}/{claim} was not created for pod {namespace}/{} (pod is not owner)",
                    pod.metadata.name.as_deref().unwrap_or("")
                )));
            }
            if let Some((driver, handle)) = self.csi_driver_info(has_csi_node, &pvc) {
                out.insert(unique_name(&driver, &handle), driver);
            }
        }
        Ok(())
    }

    /// The CSI driver and volume handle of a claim: from its bound volume (translated when
    /// in-tree), else a made-up handle under its class's provisioner.
    fn csi_driver_info(
        &self,
        has_csi_node: bool,
        pvc: &PersistentVolumeClaim,
    ) -> Option<(String, String)> {
        let pv_name = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or("");
        let pv = (!pv_name.is_empty())
            .then(|| self.objects().persistent_volumes.get(None, pv_name))
            .flatten();
        let Some(pv) = pv else {
            // Not bound yet, or bound to a volume not seen yet: count it by its class.
            return self.csi_driver_info_from_class(has_csi_node, pvc);
        };
        if let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) {
            return Some((csi.driver.clone(), csi.volume_handle.clone()));
        }
        let translated = translate::persistent(&pv)?;
        migration_on(has_csi_node, translated.plugin)
            .then(|| (translated.plugin.driver.to_string(), translated.handle))
    }

    fn csi_driver_info_from_class(
        &self,
        has_csi_node: bool,
        pvc: &PersistentVolumeClaim,
    ) -> Option<(String, String)> {
        // Without a class the claim must bind immediately, so it is bound before the pod is
        // scheduled: nothing to count.
        let class_name = claim_class(pvc);
        if class_name.is_empty() {
            return None;
        }
        let class = self.objects().storage_classes.get(None, class_name)?;
        let handle = format!(
            "{UNBOUND_HANDLE_PREFIX}-{}/{}",
            pvc.metadata.namespace.as_deref().unwrap_or("default"),
            pvc.metadata.name.as_deref().unwrap_or("")
        );
        match translate::by_name(&class.provisioner) {
            Some(plugin) => {
                migration_on(has_csi_node, plugin).then(|| (plugin.driver.to_string(), handle))
            }
            None => Some((class.provisioner.clone(), handle)),
        }
    }

    /// The volumes attached to each node by VolumeAttachments naming a CSI volume, read
    /// again only when attachments or volumes changed.
    fn attachments_by_node(&self) -> AttachmentsByNode {
        let objects = self.objects();
        let key = (
            objects.volume_attachments.generation(),
            objects.persistent_volumes.generation(),
        );
        let mut kept = self.attachments.lock();
        if let Some((at, attachments)) = kept.as_ref()
            && *at == key
        {
            return attachments.clone();
        }
        let mut map: HashMap<String, Vec<(String, String)>> = HashMap::new();
        for va in objects.volume_attachments.list() {
            if let Some(entry) = attachment_volume(objects, &va) {
                map.entry(va.spec.node_name.clone())
                    .or_default()
                    .push(entry);
            }
        }
        let attachments = AttachmentsByNode(Arc::new(map));
        *kept = Some((key, attachments.clone()));
        attachments
    }

    fn store_generations(&self) -> StoreGenerations {
        let objects = self.objects();
        StoreGenerations {
            claims: objects.persistent_volume_claims.generation(),
            volumes: objects.persistent_volumes.generation(),
            classes: objects.storage_classes.generation(),
            csi_nodes: objects.csi_nodes.generation(),
            attachments: objects.volume_attachments.generation(),
        }
    }

    /// The pod's attachable volumes (`driver/handle`, driver), or why they cannot be read.
    fn pod_volumes(&self, pod: &Pod) -> PodVolumes {
        let resolve = |has_csi_node| {
            let mut out = UniqueVolumes::new();
            self.attachable_volumes(pod, has_csi_node, true, &mut out)
                .map(|()| {
                    let mut by_driver = VolumesByDriver::new();
                    for (unique, driver) in out {
                        match by_driver.iter_mut().find(|(d, _)| *d == driver) {
                            Some((_, uniques)) => uniques.push(unique),
                            None => by_driver.push((driver, vec![unique])),
                        }
                    }
                    by_driver
                })
        };
        PodVolumes {
            with_csi_node: Arc::new(resolve(true)),
            without_csi_node: Arc::new(resolve(false)),
        }
    }

    /// The node's count: the kept one when neither the node nor the stores changed since.
    fn node_count(&self, node: &NodeInfo) -> Arc<NodeCount> {
        // Read before counting: a change made meanwhile leaves an older key behind, so
        // the next call counts again.
        let stores = self.store_generations();
        if let Some(kept) = self.counts.read().get(node.name())
            && kept.node_generation == node.generation
            && kept.pods == node.pods.len()
            && kept.stores == stores
        {
            return Arc::clone(kept);
        }
        let count = Arc::new(self.count_node(node, stores));
        self.counts
            .write()
            .insert(node.name().to_string(), Arc::clone(&count));
        count
    }

    /// Counts the volumes in use on a node from scratch.
    fn count_node(&self, node: &NodeInfo, stores: StoreGenerations) -> NodeCount {
        let csi_node = self.objects().csi_nodes.get(None, node.name());
        let has_csi_node = csi_node.is_some();
        let drivers = csi_node
            .iter()
            .flat_map(|n| n.spec.drivers.iter().map(|d| d.name.clone()))
            .collect();
        let limits: Vec<(String, i64)> = volume_limits(csi_node.as_deref())
            .into_iter()
            .map(|(driver, limit)| (driver.to_string(), limit))
            .collect();
        let in_use = if limits.is_empty() {
            // Filter stops at the missing limits before it looks at the node's pods.
            Ok(InUse::default())
        } else {
            self.in_use(node, has_csi_node)
        };
        NodeCount {
            node_generation: node.generation,
            pods: node.pods.len(),
            stores,
            has_csi_node,
            drivers,
            limits,
            in_use,
        }
    }

    fn in_use(&self, node: &NodeInfo, has_csi_node: bool) -> Result<InUse, Status> {
        let mut attached = UniqueVolumes::new();
        // A pod without volumes is skipped unread: a dump's pods stay packed.
        for existing in node.pods.iter().filter(|p| p.pod.has_volumes()) {
            self.attachable_volumes(&existing.pod, has_csi_node, false, &mut attached)?;
        }
        let by_pods: FxHashSet<String> = attached.keys().cloned().collect();
        // Attachments not explained by a pod on the node (being attached or detached)
        // still take their slot.
        let by_node = self.attachments_by_node();
        for (unique, driver) in by_node.0.get(node.name()).into_iter().flatten() {
            attached
                .entry(unique.clone())
                .or_insert_with(|| driver.clone());
        }
        let mut per_driver: Vec<(String, i64)> = Vec::new();
        for driver in attached.into_values() {
            match per_driver.iter_mut().find(|(d, _)| *d == driver) {
                Some((_, n)) => *n += 1,
                None => per_driver.push((driver, 1)),
            }
        }
        Ok(InUse {
            by_pods,
            per_driver,
        })
    }
}

/// A VolumeAttachment's volume as `(driver/handle, driver)`: only attachments of a CSI
/// PersistentVolume are counted, as upstream.
fn attachment_volume(objects: &ObjectStore, va: &VolumeAttachment) -> Option<(String, String)> {
    let attacher = va.spec.attacher.as_str();
    let pv_name = va.spec.source.persistent_volume_name.as_deref()?;
    if attacher.is_empty() {
        return None;
    }
    let pv = objects.persistent_volumes.get(None, pv_name)?;
    let csi = pv.spec.as_ref()?.csi.as_ref()?;
    Some((
        unique_name(attacher, &csi.volume_handle),
        attacher.to_string(),
    ))
}

/// Whether a claim is the generic ephemeral claim of `pod` (the pod controls it).
fn claim_is_for_pod(pod: &Pod, pvc: &PersistentVolumeClaim) -> bool {
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    pvc.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "Pod" && o.uid == uid)
}

/// Above this many kept counts per node of the cycle, old nodes are forgotten.
const KEPT_COUNTS_PER_NODE: usize = 2;

impl PreFilterPlugin for NodeVolumeLimits {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        if !volumes(&pod.pod).iter().any(may_count) {
            return (None, Status::skip());
        }
        {
            // Counts of nodes gone (or of copies made for preemption) are not kept forever.
            let mut counts = self.counts.write();
            if counts.len() > KEPT_COUNTS_PER_NODE * nodes.len() + 16 {
                counts.clear();
            }
        }
        state.write(self.pod_volumes(&pod.pod));
        (None, Status::success())
    }
}

impl FilterPlugin for NodeVolumeLimits {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if volumes(&pod.pod).is_empty() {
            return Status::success();
        }
        // Resolved here when PreFilter did not run.
        let computed;
        let pod_volumes = match state.read::<PodVolumes>() {
            Some(v) => v,
            None => {
                computed = self.pod_volumes(&pod.pod);
                &computed
            }
        };
        // A claim that cannot be read fails the same way with or without a CSINode, and a
        // pod with nothing to count fits whatever the node.
        match (
            pod_volumes.with_csi_node.as_ref(),
            pod_volumes.without_csi_node.as_ref(),
        ) {
            (Err(status), _) | (_, Err(status)) => return status.clone(),
            (Ok(with), Ok(without)) if with.is_empty() && without.is_empty() => {
                return Status::success();
            }
            _ => {}
        }
        let count = self.node_count(node);
        let new_volumes = if count.has_csi_node {
            &pod_volumes.with_csi_node
        } else {
            &pod_volumes.without_csi_node
        };
        let new_volumes = match new_volumes.as_ref() {
            Ok(v) => v,
            Err(status) => return status.clone(),
        };
        if self.volume_limit_scaling
            && let Some(driver) = new_volumes
                .iter()
                .map(|(driver, _)| driver)
                .find(|d| !count.drivers.contains(*d) && self.driver_required(d))
        {
            return Status::unschedulable(err_reason_driver_missing(driver));
        }
        if new_volumes.is_empty() || count.limits.is_empty() {
            return Status::success();
        }
        let in_use = match &count.in_use {
            Ok(in_use) => in_use,
            Err(status) => return status.clone(),
        };
        for (driver, uniques) in new_volumes {
            let Some(limit) = for_driver(&count.limits, driver) else {
                continue;
            };
            // A volume a running pod already uses takes no new slot.
            let count_new = uniques
                .iter()
                .filter(|unique| !in_use.by_pods.contains(*unique))
                .count() as i64;
            if count_new > 0 {
                let current = for_driver(&in_use.per_driver, driver).unwrap_or(0);
                if current + count_new > limit {
                    tracing::trace!(pod = %pod.key(), node = %node.name(), driver, limit, current, count = count_new, "attach limit exceeded");
                    return Status::unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED);
                }
            }
        }
        Status::success()
    }
}

/// Whether deleting `deleted` may free an attachment slot.
fn pod_deleted_may_help(deleted: &PodInfo) -> QueueingHint {
    if deleted.node_name.is_none() || !volumes(&deleted.pod).iter().any(may_count) {
        QueueingHint::Skip
    } else {
        QueueingHint::Queue
    }
}

/// The claim names a pod uses (plain and generic ephemeral).
fn claim_names(pod: &Pod) -> impl Iterator<Item = String> + '_ {
    volumes(pod).iter().filter_map(|v| {
        if let Some(c) = &v.persistent_volume_claim {
            Some(c.claim_name.clone())
        } else if v.ephemeral.is_some() {
            Some(ephemeral_claim_name(pod, v))
        } else {
            None
        }
    })
}

/// Whether a new claim is one the pod uses.
fn claim_added_may_help(pod: &PodInfo, pvc: &PersistentVolumeClaim) -> QueueingHint {
    let namespace = pvc.metadata.namespace.as_deref().unwrap_or("default");
    let name = pvc.metadata.name.as_deref().unwrap_or("");
    if namespace == pod.namespace && claim_names(&pod.pod).any(|c| c == name) {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

/// Whether a removed attachment was of a volume like the pod's: the volume bound to one of
/// its claims, or a volume of the driver one of its inline volumes migrates to.
fn attachment_deleted_may_help(
    objects: &ObjectStore,
    pod: &PodInfo,
    va: &VolumeAttachment,
) -> QueueingHint {
    if let Some(pv) = va.spec.source.persistent_volume_name.as_deref() {
        let bound_to_it = claim_names(&pod.pod).any(|claim| {
            objects
                .persistent_volume_claims
                .get(Some(&pod.namespace), &claim)
                .and_then(|c| c.spec.as_ref().and_then(|s| s.volume_name.clone()))
                .is_some_and(|v| v == pv)
        });
        if bound_to_it {
            return QueueingHint::Queue;
        }
    }
    let same_driver = volumes(&pod.pod)
        .iter()
        .filter_map(translate::inline)
        .any(|v| v.plugin.driver == va.spec.attacher);
    if same_driver {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

/// Whether a CSINode update gave some driver more room (a higher limit, or none).
fn csi_node_updated_may_help(
    old: &CSINode,
    new: &CSINode,
    volume_limit_scaling: bool,
) -> QueueingHint {
    let before = volume_limits(Some(old));
    let after = volume_limits(Some(new));
    let more_room = before
        .iter()
        .any(|(driver, &limit)| after.get(driver).is_none_or(|&l| l > limit));
    // With VolumeLimitScaling a driver newly registered on the node may be the one a
    // rejected pod waited for.
    let new_driver = volume_limit_scaling
        && new
            .spec
            .drivers
            .iter()
            .any(|d| !old.spec.drivers.iter().any(|o| o.name == d.name));
    if more_room || new_driver {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

impl EnqueueExtensions for NodeVolumeLimits {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        let objects = self.handle.objects().clone();
        let volume_limit_scaling = self.volume_limit_scaling;
        vec![
            // Any new CSINode may bring room.
            ClusterEventWithHint::new(EventResource::CSINode, ActionType::ADD),
            ClusterEventWithHint::with_hint(
                EventResource::CSINode,
                ActionType::UPDATE,
                move |_pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
                    let old = old
                        .and_then(EventObject::downcast::<CSINode>)
                        .ok_or("expected the old CSINode")?;
                    let new = new
                        .and_then(EventObject::downcast::<CSINode>)
                        .ok_or("expected the new CSINode")?;
                    Ok(csi_node_updated_may_help(old, new, volume_limit_scaling))
                },
            ),
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE,
                |_pod: &PodInfo, old: Option<&EventObject>, _new: Option<&EventObject>| {
                    let deleted = old.and_then(EventObject::as_pod).ok_or("expected a pod")?;
                    Ok(pod_deleted_may_help(deleted))
                },
            ),
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD,
                |pod: &PodInfo, _old: Option<&EventObject>, new: Option<&EventObject>| {
                    let added = new
                        .and_then(EventObject::downcast::<PersistentVolumeClaim>)
                        .ok_or("expected a PersistentVolumeClaim")?;
                    Ok(claim_added_may_help(pod, added))
                },
            ),
            ClusterEventWithHint::with_hint(
                EventResource::VolumeAttachment,
                ActionType::DELETE,
                move |pod: &PodInfo, old: Option<&EventObject>, _new: Option<&EventObject>| {
                    let va = old
                        .and_then(EventObject::downcast::<VolumeAttachment>)
                        .ok_or("expected a VolumeAttachment")?;
                    Ok(attachment_deleted_may_help(&objects, pod, va))
                },
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
