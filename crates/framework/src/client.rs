//! `ClusterClient`: everything the scheduler writes to the cluster. Implemented by the
//! kube-rs backend (crates/live) and the in-memory backend (crates/sim).

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PodExtendedResourceClaimStatus,
};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kubesched_model::PodInfo;

use crate::events::EventObject;
use crate::kinds::ObjectKind;

/// Why a write to the cluster failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The object changed or is already in the requested state (HTTP 409).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The object does not exist (HTTP 404).
    #[error("not found: {0}")]
    NotFound(String),
    /// A failure upstream's `Retriable` counts as transient: the server answered HTTP 500
    /// (InternalError) or 503 (ServiceUnavailable), or refused the connection. Writes that
    /// upstream retries (the pod's binding) are tried again on it.
    #[error("{0}")]
    Transient(String),
    /// Any other failure.
    #[error("{0}")]
    Other(String),
}

impl ClientError {
    /// Whether trying the same write again may succeed: only [`ClientError::Transient`]. A
    /// conflict or a missing object stays so, and anything else is not known to pass.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient(_))
    }

    /// The message without the variant's prefix.
    pub fn message(&self) -> &str {
        match self {
            Self::Conflict(m) | Self::NotFound(m) | Self::Transient(m) | Self::Other(m) => m,
        }
    }
}

/// A reference to the object an event is about.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObjectRef {
    /// `Pod`, `Node`, ...
    pub kind: String,
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

impl ObjectRef {
    /// A reference to a pod.
    pub fn pod(pod: &PodInfo) -> Self {
        Self {
            kind: "Pod".into(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        }
    }
}

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum EventType {
    /// Informational.
    Normal,
    /// Something went wrong.
    Warning,
}

/// An events.k8s.io/v1 event as the scheduler records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Event {
    /// What it is about.
    pub regarding: ObjectRef,
    /// Normal or Warning.
    pub event_type: EventType,
    /// `Scheduled`, `FailedScheduling`, `Preempted`.
    pub reason: String,
    /// `Binding`, `Scheduling`, `Preempting`.
    pub action: String,
    /// The human-readable message.
    pub note: String,
    /// A second object the event involves: the preemptor, on a `Preempted` event.
    pub related: Option<ObjectRef>,
}

/// The `PodScheduled` condition the scheduler sets on a pod.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PodScheduledCondition {
    /// `True` or `False`.
    pub status: String,
    /// `Unschedulable`, `SchedulingGated`, `SchedulerError`.
    pub reason: String,
    /// The message, e.g. `0/3 nodes are available: ...`.
    pub message: String,
}

/// A change to a pod's status.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PodStatusUpdate {
    /// The condition to set, if any.
    pub condition: Option<PodScheduledCondition>,
    /// Some(Some(node)) sets `nominatedNodeName`, Some(None) clears it.
    pub nominated_node_name: Option<Option<String>>,
}

/// The scheduler's only way to change the cluster.
#[async_trait]
pub trait ClusterClient: Send + Sync {
    /// Binds the pod to the node (the `binding` subresource).
    async fn bind(&self, pod: &PodInfo, node_name: &str) -> Result<(), ClientError>;
    /// Deletes a pod (a preemption victim).
    async fn delete_pod(&self, pod: &PodInfo) -> Result<(), ClientError>;
    /// Patches the pod's status.
    async fn update_pod_status(
        &self,
        pod: &PodInfo,
        update: &PodStatusUpdate,
    ) -> Result<(), ClientError>;
    /// Records an event; never blocks, never fails the caller.
    fn record_event(&self, event: Event);
    /// A scheduler extender bound the pod to the node through its own API client. A real
    /// API server shows that binding on its own, so the default does nothing; a backend
    /// the extender cannot reach (the in-memory cluster) records it here.
    async fn bound_by_extender(&self, _pod: &PodInfo, _node_name: &str) -> Result<(), ClientError> {
        Ok(())
    }

    /// Replaces a PersistentVolume (VolumeBinding's PreBind writes the `claimRef` of a
    /// static binding this way). Conflict when `metadata.resourceVersion` is stale.
    /// Returns the volume as stored.
    async fn update_persistent_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<PersistentVolume, ClientError>;

    /// Replaces a PersistentVolumeClaim (VolumeBinding's PreBind sets
    /// `volume.kubernetes.io/selected-node` this way to have a claim provisioned).
    /// Conflict when `metadata.resourceVersion` is stale. Returns the claim as stored.
    async fn update_persistent_volume_claim(
        &self,
        pvc: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, ClientError>;
    /// Reads a ResourceClaim as the API server has it now (DynamicResources rereads a
    /// claim after a write conflict).
    async fn get_resource_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ResourceClaim, ClientError> {
        let _ = (namespace, name);
        Err(unsupported("reading ResourceClaims"))
    }

    /// Replaces a ResourceClaim's metadata and spec (DynamicResources adds its allocation
    /// finalizer this way). Conflict when `metadata.resourceVersion` is stale. Returns the
    /// claim as stored.
    async fn update_resource_claim(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let _ = claim;
        Err(unsupported("updating ResourceClaims"))
    }

    /// Replaces a ResourceClaim's status (allocation and `reservedFor`) through the `status`
    /// subresource. Conflict when `metadata.resourceVersion` is stale. Returns the claim as
    /// stored.
    async fn update_resource_claim_status(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let _ = claim;
        Err(unsupported("updating ResourceClaim status"))
    }

    /// Removes the pod with `pod_uid` from the claim's `status.reservedFor` without a
    /// resourceVersion precondition (a strategic merge patch in cluster mode).
    async fn remove_resource_claim_reservation(
        &self,
        claim: &ResourceClaim,
        pod_uid: &str,
    ) -> Result<(), ClientError> {
        let _ = (claim, pod_uid);
        Err(unsupported("patching ResourceClaim status"))
    }

    /// Creates a ResourceClaim (HTTP POST; DynamicResources' PreBind creates the claim of
    /// a pod's DRA-backed extended resources this way). The claim has `metadata.name` or
    /// `metadata.generateName`; Conflict when a claim of that name exists. Returns the
    /// claim as stored (with its name, UID and resourceVersion).
    async fn create_resource_claim(
        &self,
        claim: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        let _ = claim;
        Err(unsupported("creating ResourceClaims"))
    }

    /// Deletes a ResourceClaim (DynamicResources removes an extended-resource claim that a
    /// failed attempt left). NotFound when it is gone already.
    async fn delete_resource_claim(&self, namespace: &str, name: &str) -> Result<(), ClientError> {
        let _ = (namespace, name);
        Err(unsupported("deleting ResourceClaims"))
    }

    /// Sets the pod's `status.extendedResourceClaimStatus` (a patch of the pod's status;
    /// DynamicResources' PreBind names the claim of the pod's DRA-backed extended resources
    /// and which container request maps to which device request).
    async fn patch_pod_extended_resource_claim_status(
        &self,
        pod: &PodInfo,
        status: &PodExtendedResourceClaimStatus,
    ) -> Result<(), ClientError> {
        let _ = (pod, status);
        Err(unsupported(
            "patching pod status.extendedResourceClaimStatus",
        ))
    }

    /// Writes an object of a plugin-declared kind (what
    /// [`ObjectWriter`](crate::ObjectWriter) sends); returns the object as stored, as JSON.
    /// The kube backend sends it to the API server; the in-memory backend applies it to its
    /// object store with [`ObjectWrite::apply`].
    async fn write_object(
        &self,
        kind: &ObjectKind,
        write: &ObjectWrite,
    ) -> Result<serde_json::Value, ClientError> {
        let _ = write;
        Err(unsupported(&format!("writing {}", kind.resource())))
    }
}

/// A write to an object of a plugin-declared kind.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectWrite {
    /// Creates the object (HTTP POST); Conflict when it exists.
    Create {
        /// The object, with `apiVersion` and `kind`.
        object: serde_json::Value,
    },
    /// Replaces the object's `status` through the status subresource (HTTP PUT); Conflict
    /// when the object's `metadata.resourceVersion` is set and stale.
    ReplaceStatus {
        /// Its namespace (None for cluster-scoped kinds).
        namespace: Option<String>,
        /// Its name.
        name: String,
        /// The object with the new status.
        object: serde_json::Value,
    },
    /// Applies a JSON merge patch to the status subresource (HTTP PATCH); only `status`
    /// changes, as the API server has it.
    PatchStatus {
        /// Its namespace (None for cluster-scoped kinds).
        namespace: Option<String>,
        /// Its name.
        name: String,
        /// The merge patch, e.g. `{"status": {"phase": "Running"}}`.
        patch: serde_json::Value,
    },
}

impl ObjectWrite {
    /// Applies the write to `objects` as an API server would (the in-memory backend's
    /// implementation of [`ClusterClient::write_object`]); returns the previous and the
    /// new object as change events carry them, and the object as stored.
    pub fn apply(
        &self,
        objects: &crate::ObjectStore,
        kind: &ObjectKind,
    ) -> Result<(Option<EventObject>, EventObject, serde_json::Value), ClientError> {
        let store = objects.register(*kind);
        let bad = |e: crate::kinds::DecodeError| ClientError::Other(e.to_string());
        let stored = match self {
            Self::Create { object } => {
                let key = crate::kinds::raw_object_key(object);
                let meta = object.get("metadata");
                let field = |f: &str| {
                    meta.and_then(|m| m.get(f))
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                };
                let (ns, name) = (field("namespace"), field("name").unwrap_or_default());
                if store.get_raw(ns.as_deref(), &name).is_some() {
                    return Err(ClientError::Conflict(format!(
                        "{} {key} already exists",
                        kind.kind
                    )));
                }
                let mut object = object.clone();
                object["metadata"]["resourceVersion"] = "1".into();
                object
            }
            Self::ReplaceStatus {
                namespace,
                name,
                object,
            } => {
                let mut current = current(&*store, kind, namespace.as_deref(), name)?;
                let given = object
                    .get("metadata")
                    .and_then(|m| m.get("resourceVersion"))
                    .and_then(|v| v.as_str());
                let have = current["metadata"]["resourceVersion"].as_str();
                if given.is_some_and(|g| Some(g) != have) {
                    return Err(ClientError::Conflict(format!(
                        "{} {name}: the object has been modified",
                        kind.kind
                    )));
                }
                match object.get("status") {
                    Some(s) => current["status"] = s.clone(),
                    None => {
                        if let Some(m) = current.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
                bump(&mut current);
                current
            }
            Self::PatchStatus {
                namespace,
                name,
                patch,
            } => {
                let mut current = current(&*store, kind, namespace.as_deref(), name)?;
                if let Some(status) = patch.get("status") {
                    let slot = current
                        .as_object_mut()
                        .map(|m| m.entry("status").or_insert(serde_json::Value::Null));
                    if let Some(slot) = slot {
                        crate::kinds::merge_patch(slot, status);
                    }
                }
                bump(&mut current);
                current
            }
        };
        let (old, new) = store.upsert_raw(stored.clone()).map_err(bad)?;
        Ok((old, new, stored))
    }
}

fn current(
    store: &dyn crate::kinds::AnyStore,
    kind: &ObjectKind,
    namespace: Option<&str>,
    name: &str,
) -> Result<serde_json::Value, ClientError> {
    store.get_raw(namespace, name).ok_or_else(|| {
        ClientError::NotFound(format!(
            "{} {}{name}",
            kind.kind,
            namespace.map(|n| format!("{n}/")).unwrap_or_default()
        ))
    })
}

/// Bumps `metadata.resourceVersion` as an API server would on a write.
fn bump(object: &mut serde_json::Value) {
    let next = object["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    object["metadata"]["resourceVersion"] = next.to_string().into();
}

fn unsupported(what: &str) -> ClientError {
    ClientError::Other(format!("{what} is not supported by this cluster client"))
}

/// A client that accepts every write and remembers nothing: for tests and dry runs.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopClient;

#[async_trait]
impl ClusterClient for NoopClient {
    async fn bind(&self, _: &PodInfo, _: &str) -> Result<(), ClientError> {
        Ok(())
    }
    async fn delete_pod(&self, _: &PodInfo) -> Result<(), ClientError> {
        Ok(())
    }
    async fn update_pod_status(&self, _: &PodInfo, _: &PodStatusUpdate) -> Result<(), ClientError> {
        Ok(())
    }
    fn record_event(&self, _: Event) {}
    async fn update_persistent_volume(
        &self,
        pv: &PersistentVolume,
    ) -> Result<PersistentVolume, ClientError> {
        Ok(pv.clone())
    }
    async fn update_persistent_volume_claim(
        &self,
        pvc: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, ClientError> {
        Ok(pvc.clone())
    }
    async fn get_resource_claim(&self, _: &str, name: &str) -> Result<ResourceClaim, ClientError> {
        Err(ClientError::NotFound(format!(
            "resourceclaims.resource.k8s.io {name:?} not found"
        )))
    }
    async fn update_resource_claim(&self, c: &ResourceClaim) -> Result<ResourceClaim, ClientError> {
        Ok(c.clone())
    }
    async fn update_resource_claim_status(
        &self,
        c: &ResourceClaim,
    ) -> Result<ResourceClaim, ClientError> {
        Ok(c.clone())
    }
    async fn remove_resource_claim_reservation(
        &self,
        _: &ResourceClaim,
        _: &str,
    ) -> Result<(), ClientError> {
        Ok(())
    }
    async fn create_resource_claim(&self, c: &ResourceClaim) -> Result<ResourceClaim, ClientError> {
        let mut stored = c.clone();
        if stored.metadata.name.as_deref().is_none_or(str::is_empty) {
            stored.metadata.name = Some(format!(
                "{}00000",
                stored.metadata.generate_name.as_deref().unwrap_or_default()
            ));
        }
        Ok(stored)
    }
    async fn delete_resource_claim(&self, _: &str, _: &str) -> Result<(), ClientError> {
        Ok(())
    }
    async fn patch_pod_extended_resource_claim_status(
        &self,
        _: &PodInfo,
        _: &PodExtendedResourceClaimStatus,
    ) -> Result<(), ClientError> {
        Ok(())
    }
}
