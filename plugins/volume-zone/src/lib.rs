//! VolumeZone: a pod whose bound PersistentVolumes carry zone or region labels fits only
//! nodes in those zones and regions.
//!
//! As upstream kube-scheduler: PreFilter reads the topology labels (GA and beta keys;
//! `__`-joined values name several zones) of the volumes bound to the pod's claims, once
//! per cycle; unbound claims of a WaitForFirstConsumer class are left to VolumeBinding;
//! Filter compares them with the node's labels (a beta key on the volume matches the GA key
//! on the node) and lets nodes without any topology label through. It only reads the
//! object store; it must not write anything.

use std::collections::BTreeSet;
use std::sync::Arc;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, Pod,
};
use kubesched_framework::model::k8s_openapi::api::storage::v1::StorageClass;
use kubesched_framework::model::storage::claim_class;
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, EnqueueExtensions, FilterPlugin, Handle, PluginError, PreFilterPlugin,
    PreFilterResult, Status,
};

/// The plugin's registered name.
pub const NAME: &str = "VolumeZone";
/// Why a node was rejected: it is not in a zone or region of one of the pod's volumes.
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";

/// The deprecated zone label.
pub const LABEL_BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
/// The deprecated region label.
pub const LABEL_BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
/// The zone label.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// The region label.
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";

/// The labels compared, in upstream's order.
const TOPOLOGY_LABELS: [&str; 4] = [LABEL_BETA_ZONE, LABEL_BETA_REGION, LABEL_ZONE, LABEL_REGION];

/// Separates the zones of a volume available in several zones.
const MULTI_ZONE_DELIMITER: &str = "__";

/// The VolumeZone plugin.
#[derive(Debug, Clone)]
pub struct VolumeZone {
    handle: Handle,
}

impl VolumeZone {
    /// Builds the plugin; it reads claims, volumes and classes from the object store.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
        })
    }
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::model::k8s_openapi::api::core::v1 as corev1;
use kubesched_framework::model::k8s_openapi::api::storage::v1 as storagev1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: VolumeZone,
    kinds: [
        corev1::PersistentVolume,
        corev1::PersistentVolumeClaim,
        storagev1::StorageClass,
    ],
    factory: VolumeZone::new,
}

/// One topology label of one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PvTopology {
    /// The volume, for logs.
    pv_name: String,
    /// The label key.
    key: &'static str,
    /// The zones (or regions) the label names.
    values: BTreeSet<String>,
}

/// The topology of the pod's bound volumes, computed by PreFilter.
#[derive(Debug, Clone)]
struct PreFilterState(Arc<Vec<PvTopology>>);

fn has_volumes(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .is_some_and(|v| !v.is_empty())
}

/// The claim names of the pod's PersistentVolumeClaim volumes, in order.
fn claim_names(pod: &Pod) -> impl Iterator<Item = &str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.as_str())
}

/// The zones of a label value (`a__b`); None when an element is empty.
fn label_zones(value: &str) -> Option<BTreeSet<String>> {
    value
        .split(MULTI_ZONE_DELIMITER)
        .map(|z| {
            let z = z.trim();
            (!z.is_empty()).then(|| z.to_string())
        })
        .collect()
}

/// The topology labels of a volume; malformed values are ignored, as upstream does.
fn pv_topologies(pv: &PersistentVolume) -> Vec<PvTopology> {
    let name = pv.metadata.name.clone().unwrap_or_default();
    let Some(labels) = pv.metadata.labels.as_ref() else {
        return Vec::new();
    };
    TOPOLOGY_LABELS
        .iter()
        .filter_map(|&key| {
            let value = labels.get(key)?;
            match label_zones(value) {
                Some(values) => Some(PvTopology {
                    pv_name: name.clone(),
                    key,
                    values,
                }),
                None => {
                    tracing::debug!(pv = %name, label = key, value = %value, "ignoring a malformed topology label");
                    None
                }
            }
        })
        .collect()
}

/// Whether a class delays binding until a pod uses the claim. An unset mode is the API
/// server's default, Immediate.
fn waits_for_first_consumer(class: &StorageClass) -> bool {
    class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
}

impl VolumeZone {
    /// The topology of the volumes bound to the pod's claims, or the status that makes
    /// the pod unresolvable (upstream's messages).
    fn pod_topologies(&self, pod: &PodInfo) -> Result<Vec<PvTopology>, Status> {
        let objects = self.handle.objects();
        let mut out = Vec::new();
        for claim in claim_names(&pod.pod) {
            if claim.is_empty() {
                return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
            }
            let Some(pvc) = objects
                .persistent_volume_claims
                .get(Some(&pod.namespace), claim)
            else {
                return Err(Status::unresolvable(format!(
                    "persistentvolumeclaim \"{claim}\" not found"
                )));
            };
            let pv_name = pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.as_deref())
                .unwrap_or("");
            if pv_name.is_empty() {
                let class_name = claim_class(&pvc);
                if class_name.is_empty() {
                    return Err(Status::unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name",
                    ));
                }
                let Some(class) = objects.storage_classes.get(None, class_name) else {
                    return Err(Status::unresolvable(format!(
                        "storageclass.storage.k8s.io \"{class_name}\" not found"
                    )));
                };
                if waits_for_first_consumer(&class) {
                    // VolumeBinding picks a volume (or provisions one) for the node.
                    continue;
                }
                return Err(Status::unresolvable("PersistentVolume had no name"));
            }
            let Some(pv) = objects.persistent_volumes.get(None, pv_name) else {
                return Err(Status::unresolvable(format!(
                    "persistentvolume \"{pv_name}\" not found"
                )));
            };
            out.extend(pv_topologies(&pv));
        }
        Ok(out)
    }
}

impl PreFilterPlugin for VolumeZone {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        if pod.pvc_names.is_empty() {
            return (None, Status::skip());
        }
        match self.pod_topologies(pod) {
            Err(status) => (None, status),
            Ok(t) if t.is_empty() => (None, Status::skip()),
            Ok(t) => {
                state.write(PreFilterState(Arc::new(t)));
                (None, Status::success())
            }
        }
    }
}

/// The GA key of a beta topology key.
fn ga_label(key: &str) -> &str {
    match key {
        LABEL_BETA_ZONE => LABEL_ZONE,
        LABEL_BETA_REGION => LABEL_REGION,
        other => other,
    }
}

impl FilterPlugin for VolumeZone {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        if !has_volumes(&pod.pod) {
            return Status::success();
        }
        let computed;
        let topologies = match state.read::<PreFilterState>() {
            Some(s) => s.0.as_slice(),
            None => {
                computed = match self.pod_topologies(pod) {
                    Ok(t) => t,
                    Err(status) => return status,
                };
                computed.as_slice()
            }
        };
        let Some(n) = node.node() else {
            return Status::error("node not found");
        };
        // A node without topology labels is in a single-zone cluster: anything goes.
        if !TOPOLOGY_LABELS.iter().any(|k| n.labels.contains_key(*k)) {
            return Status::success();
        }
        for t in topologies {
            let value = n
                .labels
                .get(t.key)
                .or_else(|| n.labels.get(ga_label(t.key)));
            if !value.is_some_and(|v| t.values.contains(v)) {
                tracing::trace!(pod = %pod.key(), node = %n.name, pv = %t.pv_name, label = t.key, "volume zone mismatch");
                return Status::unresolvable(ERR_REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

fn pvc_of(obj: Option<&EventObject>) -> Result<&PersistentVolumeClaim, String> {
    obj.and_then(EventObject::downcast::<PersistentVolumeClaim>)
        .ok_or_else(|| "expected a PersistentVolumeClaim".to_string())
}

/// Whether a new or changed claim is one the pod mounts.
fn claim_changed_may_help(pod: &PodInfo, pvc: &PersistentVolumeClaim) -> QueueingHint {
    let namespace = pvc.metadata.namespace.as_deref().unwrap_or("default");
    let name = pvc.metadata.name.as_deref().unwrap_or("");
    if namespace == pod.namespace && claim_names(&pod.pod).any(|c| c == name) {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

/// Whether a volume was created or its topology labels changed.
fn volume_changed_may_help(old: Option<&PersistentVolume>, new: &PersistentVolume) -> QueueingHint {
    match old {
        None => QueueingHint::Queue,
        Some(old) if pv_topologies(old) != pv_topologies(new) => QueueingHint::Queue,
        Some(_) => QueueingHint::Skip,
    }
}

impl EnqueueExtensions for VolumeZone {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            // A WaitForFirstConsumer class lets an unbound claim through; the binding mode is
            // immutable, so class updates are not registered.
            ClusterEventWithHint::with_hint(
                EventResource::StorageClass,
                ActionType::ADD,
                |_pod: &PodInfo, _old: Option<&EventObject>, new: Option<&EventObject>| {
                    let class = new
                        .and_then(EventObject::downcast::<StorageClass>)
                        .ok_or("expected a StorageClass")?;
                    Ok(if waits_for_first_consumer(class) {
                        QueueingHint::Queue
                    } else {
                        QueueingHint::Skip
                    })
                },
            ),
            // A new node, or a node's zone labels, may match the volumes.
            ClusterEventWithHint::new(
                EventResource::Node,
                ActionType::ADD.union(ActionType::UPDATE_NODE_LABEL),
            ),
            // The claim may have been created, or bound (volumeName filled in).
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolumeClaim,
                ActionType::ADD.union(ActionType::UPDATE),
                |pod: &PodInfo, _old: Option<&EventObject>, new: Option<&EventObject>| {
                    Ok(claim_changed_may_help(pod, pvc_of(new)?))
                },
            ),
            // A new volume, or a volume's zone labels.
            ClusterEventWithHint::with_hint(
                EventResource::PersistentVolume,
                ActionType::ADD.union(ActionType::UPDATE),
                |_pod: &PodInfo, old: Option<&EventObject>, new: Option<&EventObject>| {
                    let new = new
                        .and_then(EventObject::downcast::<PersistentVolume>)
                        .ok_or("expected a PersistentVolume")?;
                    let old = old.and_then(EventObject::downcast::<PersistentVolume>);
                    Ok(volume_changed_may_help(old, new))
                },
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
