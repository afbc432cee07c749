//! Queueing hints: which storage changes may make a pod VolumeBinding rejected schedulable,
//! as upstream decides them. A hint that is not given the objects it needs answers Queue.

use kubesched_framework::events::{EventObject, QueueingHint};
use kubesched_framework::model::PodInfo;
use kubesched_framework::model::k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kubesched_framework::model::k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass,
};

use crate::claims::{claim_names, volume_limit};
use crate::volume::ANN_MIGRATED_PLUGINS;

type Hint = Result<QueueingHint, String>;

/// The old and new objects of kind `K`; an error when the event does not carry them.
fn objects<'a, K: 'static>(
    old: Option<&'a EventObject>,
    new: Option<&'a EventObject>,
) -> Result<(Option<&'a K>, &'a K), String> {
    let new = new.and_then(EventObject::downcast::<K>).ok_or_else(|| {
        format!(
            "expected a {} as the new object",
            std::any::type_name::<K>()
        )
    })?;
    let old = match old {
        None => None,
        Some(o) => Some(o.downcast::<K>().ok_or_else(|| {
            format!(
                "expected a {} as the old object",
                std::any::type_name::<K>()
            )
        })?),
    };
    Ok((old, new))
}

fn queue_if(yes: bool) -> Hint {
    Ok(if yes {
        QueueingHint::Queue
    } else {
        QueueingHint::Skip
    })
}

/// A claim the pod uses was created or changed.
pub fn after_claim_change(
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Hint {
    let (_, pvc) = objects::<PersistentVolumeClaim>(old, new)?;
    if pvc.metadata.namespace.as_deref() != Some(pod.namespace.as_str()) {
        return queue_if(false);
    }
    let name = pvc.metadata.name.as_deref().unwrap_or_default();
    queue_if(claim_names(&pod.pod).any(|c| c == name))
}

/// A class was created, or its allowed topologies changed (the binding mode cannot change).
pub fn after_class_change(
    _: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Hint {
    let (old, new) = objects::<StorageClass>(old, new)?;
    queue_if(old.is_none_or(|o| o.allowed_topologies != new.allowed_topologies))
}

/// A CSINode was created, or the in-tree plugins migrated on it changed.
pub fn after_csi_node_change(
    _: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Hint {
    let (old, new) = objects::<CSINode>(old, new)?;
    let migrated = |n: &CSINode| {
        n.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANN_MIGRATED_PLUGINS))
            .cloned()
    };
    queue_if(old.is_none_or(|o| migrated(o) != migrated(new)))
}

/// A capacity pool was created, or the largest volume it can hold grew.
pub fn after_capacity_change(
    _: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Hint {
    let (old, new) = objects::<CSIStorageCapacity>(old, new)?;
    let Some(old) = old else {
        return queue_if(true);
    };
    let grew = match (volume_limit(old), volume_limit(new)) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(o), Some(n)) => n > o,
    };
    queue_if(grew)
}

/// A CSI driver the pod uses inline stopped tracking capacity (upstream's check, kept as it
/// is: it looks at inline CSI volumes only).
pub fn after_csi_driver_change(
    pod: &PodInfo,
    old: Option<&EventObject>,
    new: Option<&EventObject>,
) -> Hint {
    let (old, new) = objects::<CSIDriver>(old, new)?;
    let Some(old) = old else {
        return queue_if(false);
    };
    let name = new.metadata.name.as_deref().unwrap_or_default();
    let uses_driver = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .any(|v| v.csi.as_ref().is_some_and(|c| c.driver == name));
    let stopped =
        old.spec.storage_capacity == Some(true) && new.spec.storage_capacity != Some(true);
    queue_if(uses_driver && stopped)
}
