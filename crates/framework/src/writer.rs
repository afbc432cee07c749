//! `ObjectWriter`: a plugin's typed write access to objects of a kind it owns (e.g. the
//! status of its own custom resource), through the handle's cluster client.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::client::{ClientError, ClusterClient, ObjectWrite};
use crate::kinds::{Kind, ObjectKind, decode_object};

/// Writes objects of kind `K`: in cluster mode to the API server (declare the write in
/// `register_plugin!`'s `writes: [KindWrite::owned::<K>()]` so RBAC allows it), in
/// simulate to the in-memory object store (so reports show it). The store of `K` sees the
/// change through the backend's watch (cluster) or at once (simulate), and plugins that
/// registered `K`'s events hear of it. Cheap to clone.
pub struct ObjectWriter<K> {
    client: Arc<dyn ClusterClient>,
    kind: ObjectKind,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Clone for ObjectWriter<K> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            kind: self.kind,
            _kind: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for ObjectWriter<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ObjectWriter").field(&self.kind).finish()
    }
}

fn to_json<K: Kind>(obj: &K) -> Result<serde_json::Value, ClientError> {
    let mut v = serde_json::to_value(obj)
        .map_err(|e| ClientError::Other(format!("encoding a {}: {e}", K::KIND)))?;
    if let Some(m) = v.as_object_mut() {
        m.insert("apiVersion".into(), K::API_VERSION.into());
        m.insert("kind".into(), K::KIND.into());
    }
    Ok(v)
}

fn name_of<K: Kind>(obj: &K) -> (Option<String>, String) {
    let meta = k8s_openapi::Metadata::metadata(obj);
    (
        meta.namespace.clone().filter(|n| !n.is_empty()),
        meta.name.clone().unwrap_or_default(),
    )
}

impl<K: Kind> ObjectWriter<K> {
    /// A writer of `K` through `client`.
    pub fn new(client: Arc<dyn ClusterClient>) -> Self {
        Self {
            client,
            kind: ObjectKind::of::<K>(),
            _kind: PhantomData,
        }
    }

    async fn send(&self, write: ObjectWrite) -> Result<K, ClientError> {
        let stored = self.client.write_object(&self.kind, &write).await?;
        decode_object::<K>(stored).map_err(|e| ClientError::Other(e.to_string()))
    }

    /// Creates `obj`; Conflict when it exists. Returns it as stored.
    pub async fn create(&self, obj: &K) -> Result<K, ClientError> {
        self.send(ObjectWrite::Create {
            object: to_json(obj)?,
        })
        .await
    }

    /// Replaces the status of the stored object named like `obj` with `obj`'s; Conflict
    /// when `obj`'s `metadata.resourceVersion` is set and stale. Returns it as stored.
    pub async fn replace_status(&self, obj: &K) -> Result<K, ClientError> {
        let (namespace, name) = name_of(obj);
        self.send(ObjectWrite::ReplaceStatus {
            namespace,
            name,
            object: to_json(obj)?,
        })
        .await
    }

    /// Applies a JSON merge patch to the status of the object `namespace/name`, e.g.
    /// `json!({"status": {"phase": "Running"}})`. Returns it as stored.
    pub async fn patch_status(
        &self,
        namespace: Option<&str>,
        name: &str,
        patch: serde_json::Value,
    ) -> Result<K, ClientError> {
        self.send(ObjectWrite::PatchStatus {
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
            patch,
        })
        .await
    }
}
