//! VolumeRestrictions: a pod may not share certain volumes with pods already on a node.
//!
//! Two rules, as upstream kube-scheduler: the in-tree disk conflicts (the same GCE PD, AWS
//! EBS volume, Ceph RBD image or iSCSI target mounted read-write by two pods on one node)
//! and ReadWriteOncePod claims (a claim with that access mode may be used by one pod in the
//! whole cluster). PreFilter looks the pod's claims up once (a missing claim makes the pod
//! unresolvable), Filter checks each node, and the PreFilter extensions keep the count of
//! pods holding the pod's ReadWriteOncePod claims exact for preemption. It only reads the
//! object store and the snapshot; it must not write anything.

use std::collections::BTreeSet;
use std::sync::Arc;

use kubesched_framework::events::{
    ActionType, ClusterEventWithHint, EventObject, EventResource, QueueingHint,
};
use kubesched_framework::model::k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use kubesched_framework::model::{NodeInfo, PodInfo};
use kubesched_framework::{
    CycleState, EnqueueExtensions, FilterPlugin, Handle, PluginError, PreFilterExtensions,
    PreFilterPlugin, PreFilterResult, Status,
};

/// The plugin's registered name.
pub const NAME: &str = "VolumeRestrictions";
/// Why a node was rejected: an in-tree volume of the pod is already mounted there.
pub const ERR_REASON_DISK_CONFLICT: &str = "node(s) had no available disk";
/// Why a node was rejected: a ReadWriteOncePod claim of the pod is in use by another pod.
pub const ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT: &str = "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod";

/// The access mode that limits a claim to a single pod.
const READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";

/// The VolumeRestrictions plugin.
#[derive(Debug, Clone)]
pub struct VolumeRestrictions {
    handle: Handle,
}

impl VolumeRestrictions {
    /// Builds the plugin; it reads claims from the handle's object store.
    pub fn new(handle: &Handle) -> Result<Self, PluginError> {
        Ok(Self {
            handle: handle.clone(),
        })
    }
}

// The kinds it reads (the backends watch and load them) and the writes it makes (RBAC).
use kubesched_framework::model::k8s_openapi::api::core::v1 as corev1;
kubesched_framework::register_plugin! {
    name: NAME,
    plugin: VolumeRestrictions,
    kinds: [corev1::PersistentVolumeClaim],
    factory: VolumeRestrictions::new,
}

/// What PreFilter found out about the pod.
#[derive(Debug, Clone)]
struct PreFilterState {
    /// Whether the pod mounts an in-tree volume that Filter must compare per node.
    check_disks: bool,
    /// Names of the pod's claims (in its namespace) with the ReadWriteOncePod access mode.
    rwop_claims: Arc<BTreeSet<String>>,
    /// How many pods (counted per use) hold one of those claims.
    conflicting_uses: i64,
}

impl PreFilterState {
    /// How many of `other`'s volumes use one of the pod's ReadWriteOncePod claims.
    fn uses_by(&self, namespace: &str, other: &PodInfo) -> i64 {
        if self.rwop_claims.is_empty() || other.namespace != namespace {
            return 0;
        }
        other
            .pvc_names
            .iter()
            .filter(|c| self.rwop_claims.contains(*c))
            .count() as i64
    }
}

fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or(&[])
}

/// Whether the volume is of a kind whose sharing between pods on a node is restricted.
fn needs_disk_check(v: &Volume) -> bool {
    v.gce_persistent_disk.is_some()
        || v.aws_elastic_block_store.is_some()
        || v.rbd.is_some()
        || v.iscsi.is_some()
}

/// Whether mounting `wanted` conflicts with one of `existing`'s volumes.
fn conflicts_with(wanted: &Volume, existing: &Pod) -> bool {
    volumes(existing)
        .iter()
        .any(|e| same_disk_in_use(wanted, e))
}

fn same_disk_in_use(v: &Volume, e: &Volume) -> bool {
    // GCE PD: shared only when every mount is read-only.
    if let (Some(a), Some(b)) = (&v.gce_persistent_disk, &e.gce_persistent_disk)
        && a.pd_name == b.pd_name
        && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
    {
        return true;
    }
    // AWS EBS: never shared.
    if let (Some(a), Some(b)) = (&v.aws_elastic_block_store, &e.aws_elastic_block_store)
        && a.volume_id == b.volume_id
    {
        return true;
    }
    // iSCSI: one target (IQN) is shared only read-only.
    if let (Some(a), Some(b)) = (&v.iscsi, &e.iscsi)
        && a.iqn == b.iqn
        && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
    {
        return true;
    }
    // Ceph RBD: the same image (a shared monitor, same pool and name) only read-only.
    if let (Some(a), Some(b)) = (&v.rbd, &e.rbd) {
        let pool = |p: &Option<String>| p.clone().unwrap_or_else(|| "rbd".to_string());
        if a.monitors.iter().any(|m| b.monitors.contains(m))
            && pool(&a.pool) == pool(&b.pool)
            && a.image == b.image
            && !(a.read_only.unwrap_or(false) && b.read_only.unwrap_or(false))
        {
            return true;
        }
    }
    false
}

/// The message of a claim the store does not have, as upstream's lister error.
fn claim_not_found(name: &str) -> String {
    format!("persistentvolumeclaim \"{name}\" not found")
}

fn has_rwop(pvc: &PersistentVolumeClaim) -> bool {
    pvc.spec
        .as_ref()
        .and_then(|s| s.access_modes.as_ref())
        .is_some_and(|m| m.iter().any(|a| a == READ_WRITE_ONCE_POD))
}

impl PreFilterPlugin for VolumeRestrictions {
    fn pre_filter(
        &self,
        state: &mut CycleState,
        pod: &PodInfo,
        _nodes: &[Arc<NodeInfo>],
    ) -> (Option<PreFilterResult>, Status) {
        let vols = volumes(&pod.pod);
        if vols.is_empty() {
            return (None, Status::skip());
        }
        let check_disks = vols.iter().any(needs_disk_check);
        let mut rwop_claims = BTreeSet::new();
        let claims = &self.handle.objects().persistent_volume_claims;
        for claim in vols
            .iter()
            .filter_map(|v| v.persistent_volume_claim.as_ref())
        {
            let Some(pvc) = claims.get(Some(&pod.namespace), &claim.claim_name) else {
                return (
                    None,
                    Status::unresolvable(claim_not_found(&claim.claim_name)),
                );
            };
            if has_rwop(&pvc) {
                rwop_claims.insert(claim.claim_name.clone());
            }
        }
        let snapshot = self.handle.snapshot();
        // At most one pod can hold a ReadWriteOncePod claim, so one use per claim in use.
        let conflicting_uses = rwop_claims
            .iter()
            .filter(|c| snapshot.is_pvc_used_by_pods(&format!("{}/{c}", pod.namespace)))
            .count() as i64;
        if !check_disks && conflicting_uses == 0 {
            return (None, Status::skip());
        }
        state.write(PreFilterState {
            check_disks,
            rwop_claims: Arc::new(rwop_claims),
            conflicting_uses,
        });
        (None, Status::success())
    }

    fn pre_filter_extensions(&self) -> Option<&dyn PreFilterExtensions> {
        Some(self)
    }
}

fn state_missing() -> Status {
    Status::error(format!(
        "reading PreFilter{NAME} from the cycle state: not found"
    ))
}

impl PreFilterExtensions for VolumeRestrictions {
    fn add_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_add: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>() else {
            return state_missing();
        };
        s.conflicting_uses += s.uses_by(&pod_to_schedule.namespace, pod_to_add);
        Status::success()
    }

    fn remove_pod(
        &self,
        state: &mut CycleState,
        pod_to_schedule: &PodInfo,
        pod_to_remove: &Arc<PodInfo>,
        _node: &NodeInfo,
    ) -> Status {
        let Some(s) = state.read_mut::<PreFilterState>() else {
            return state_missing();
        };
        s.conflicting_uses -= s.uses_by(&pod_to_schedule.namespace, pod_to_remove);
        Status::success()
    }
}

impl FilterPlugin for VolumeRestrictions {
    fn filter(&self, state: &CycleState, pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(s) = state.read::<PreFilterState>() else {
            return state_missing();
        };
        if s.check_disks {
            for v in volumes(&pod.pod).iter().filter(|v| needs_disk_check(v)) {
                // A pod without volumes is skipped unread (it may be packed).
                if node
                    .pods
                    .iter()
                    .any(|e| e.pod.has_volumes() && conflicts_with(v, &e.pod))
                {
                    return Status::unschedulable(ERR_REASON_DISK_CONFLICT);
                }
            }
        }
        if s.conflicting_uses > 0 {
            return Status::unschedulable(ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT);
        }
        Status::success()
    }
}

/// Whether deleting `deleted` may free a disk or a claim `pod` waits for.
fn deletion_may_help(pod: &PodInfo, deleted: &PodInfo) -> QueueingHint {
    if deleted.namespace != pod.namespace {
        return QueueingHint::Skip;
    }
    let disk_freed = volumes(&pod.pod)
        .iter()
        .filter(|v| needs_disk_check(v))
        .any(|v| conflicts_with(v, &deleted.pod));
    // The claim's access mode is not looked up (as upstream): any shared claim may help.
    let claim_freed = deleted.pvc_names.iter().any(|c| pod.pvc_names.contains(c));
    if disk_freed || claim_freed {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

/// Whether a new claim is one the pod mounts.
fn claim_added_may_help(pod: &PodInfo, added: &PersistentVolumeClaim) -> QueueingHint {
    let same_namespace = added.metadata.namespace.as_deref().unwrap_or("default") == pod.namespace;
    let name = added.metadata.name.as_deref().unwrap_or("");
    if same_namespace && pod.pvc_names.iter().any(|c| c == name) {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    }
}

impl EnqueueExtensions for VolumeRestrictions {
    fn events_to_register(&self) -> Vec<ClusterEventWithHint> {
        vec![
            // Volumes are immutable: only a deletion frees a disk or a claim.
            ClusterEventWithHint::with_hint(
                EventResource::Pod,
                ActionType::DELETE,
                |pod: &PodInfo, old: Option<&EventObject>, _new: Option<&EventObject>| {
                    let deleted = old.and_then(EventObject::as_pod).ok_or("expected a pod")?;
                    Ok(deletion_may_help(pod, deleted))
                },
            ),
            // A new node has no volumes mounted.
            ClusterEventWithHint::new(EventResource::Node, ActionType::ADD),
            // The claim PreFilter could not find may have been created.
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
        ]
    }
}

#[cfg(test)]
mod tests;
